// aedes (npm) as a stand-alone broker for fleetwire's broker matrix: plain TCP on the
// address and port given, in-memory persistence (sessions and retained messages last
// as long as this process), anonymous clients, and the matrix's one refusal: a
// subscription under fw/denied/ gets SUBACK 0x80 (aedes: a null subscription).
//   node server.mjs HOST PORT
// Prints "listening HOST:PORT aedes VERSION" once it accepts connections; logs
// connections and client errors to stdout; SIGTERM closes it cleanly.
import net from 'node:net'
import { readFileSync } from 'node:fs'
import { Aedes } from 'aedes'

const [host, portText] = process.argv.slice(2)
const port = Number(portText)
if (!host || !Number.isInteger(port)) {
  console.error('usage: node server.mjs HOST PORT')
  process.exit(2)
}
// aedes exports no package.json: read the installed one
const version = JSON.parse(readFileSync(new URL('./node_modules/aedes/package.json', import.meta.url))).version
const DENIED = 'fw/denied/'

const aedes = await Aedes.createBroker({
  authorizeSubscribe (client, sub, callback) {
    callback(null, sub.topic.startsWith(DENIED) ? null : sub)
  }
})
const log = (...a) => console.log(new Date().toISOString(), ...a)
aedes.on('client', (c) => log('connect', c.id))
aedes.on('clientDisconnect', (c) => log('disconnect', c.id))
aedes.on('clientError', (c, e) => log('client error', c && c.id, e.message))
aedes.on('connectionError', (c, e) => log('connection error', c && c.id, e.message))
aedes.on('keepaliveTimeout', (c) => log('keepalive timeout', c.id))

const server = net.createServer(aedes.handle)
server.on('error', (e) => {
  console.error('cannot listen on %s:%d: %s', host, port, e.message)
  process.exit(1)
})
server.listen(port, host, () => log(`listening ${host}:${port} aedes ${version}`))

process.on('SIGTERM', () => {
  server.close()
  aedes.close(() => process.exit(0))
})
