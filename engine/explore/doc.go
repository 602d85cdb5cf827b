// Package explore holds kmirror's compound-fault explorer, a test only:
// seeded random scenarios of operator commands, producer traffic and faults
// over two in-process clusters and one to three engine instances, with an
// oracle that checks DESIGN §5.4's invariants after every step. See
// explore_test.go for how to run and replay it, and docs/reliability.md.
package explore
