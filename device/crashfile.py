# Where a port has no RTC memory (the unix port; a board's machine.RTC without memory()),
# crash records are kept in a file instead: written whole, then renamed, so a power cut
# leaves the old one or the new. Writing allocates: a best effort, a MemoryError loses it.
import os


class F:
    def memory(self, b=None):
        if b is None:
            try:
                with open("crash.rtc", "rb") as f:
                    return f.read()
            except OSError:
                return b""
        try:
            with open("crash.rtc.t", "wb") as f:
                f.write(b)
            os.rename("crash.rtc.t", "crash.rtc")
        except (OSError, MemoryError):
            pass
