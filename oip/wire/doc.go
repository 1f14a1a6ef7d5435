// Package wire holds the JSON shapes of the OIP dispatch ledger's HTTP API
// (SPEC sections 7–9): records, receipts and outcomes, the directory, built
// commands, checkpoints and proofs. Package oip serves them and package
// client reads them; oip's types of the same names are aliases of these.
//
// The package imports nothing outside the standard library, so that a
// program that only talks to a ledger over HTTP does not inherit the
// server. Checking records, proofs and checkpoints offline needs RFC 8785
// canonical JSON, signed notes and Merkle proofs; that lives in the opt-in
// package oip/verify.
package wire
