// Command tebis is the single tebis binary: the region server (`server`)
// and the master (`master`) of a cluster, the tools that set one up and
// use it (`cluster init` and `cluster status`, `config check`, `kv`), the
// volume inspector (`inspect`), and the demos, benchmarks and fault
// tests (`demo`, `bench`, `torture`). Commands only wire flags to
// packages (region, master, client, tools/...), where the logic lives.
//
// Every command runs under a context that SIGINT or SIGTERM cancels: a
// server then stops serving, syncs and closes its volume; SIGHUP makes a
// standalone server re-read its map file. A command that fails prints
// "tebis: " and the error on stderr and exits with status 1.
package main
