// Package torture is tebis's Jepsen-style fault-injection tool (`tebis
// torture`): it starts a real cluster (a ZooKeeper ensemble, two masters,
// region servers), each process in a network namespace of its own when it
// runs as root, runs checked workloads against it while a seeded schedule
// of nemeses kills, pauses, partitions, slows and starves its processes,
// and checks what the clients saw: per-key linearizability of a register
// workload (porcupine), and a set workload's acknowledged inserts and
// deletes after a final scan. It writes a summary table, a timeline plot
// and, on a violation, every process's log and the checker's evidence.
package torture
