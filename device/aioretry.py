# AsyncClient's reconnect task, loaded with reconnect=True (a program without it pays
# nothing): it waits as the Session said, tries, and asks the Session again; it ends with
# the link up, or with c.fatal set when the Session says there is no point. The client
# (c) keeps the task in _retry_task and the Session's next wait in _next.
import asyncio

try:
    from time import ticks_ms
except ImportError:
    from .cpython import ticks_ms


async def run(c, wait):
    try:
        while not c._closing and c.reconnect:
            await asyncio.sleep(wait / 1000)
            if c._closing or not c.reconnect:
                return
            c._next = -1
            try:
                await c._open()
                return
            except Exception as e:
                why = e
            if c._next < 0:  # lost() was not asked yet (say, the TCP connect failed)
                try:
                    c._next = c.lost(ticks_ms(), why)
                except Exception as e:
                    c.fatal = e
            if c.fatal is not None:
                return
            wait = c._next
    finally:
        if c._retry_task is asyncio.current_task():
            c._retry_task = None
        c._wake()
