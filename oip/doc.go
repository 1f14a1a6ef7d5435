// Package oip is the OIP dispatch ledger (SPEC sections 7–9): an
// append-only, verifiable log of work objects — CLI directory rows and
// invocations of them — kept in a store.LedgerStore and served over HTTP.
//
// # The loop
//
// Dispatching {"key": K, "body": {"type": T, ...}} appends one immutable
// Record and answers with a Receipt (inv_ID, seq, entry_hash, supersedes).
// Any record can be replayed by inv_ID or by key (latest, or the whole
// history oldest first), and repaired by dispatching the key again: the new
// record's supersedes names the previous version, which stays readable.
// The directory lists the latest directory row of every key; the command
// endpoint builds a row's argv and shell string (package oip/command)
// without writing anything.
//
// # Hashing
//
// A record's entry_hash is the hex SHA-256 of its canonical JSON (RFC 8785,
// see CanonicalJSON): the object of inv_ID, seq, key, type, body,
// timestamp, source and supersedes (null when none), plus result_of and
// replay_of when set. entry_hash itself and the computed replayed_by are
// not hashed. Timestamps are RFC 3339 UTC with whole seconds. Bodies are
// stored as dispatched (compacted); since RFC 8785 writes numbers as
// IEEE-754 doubles, a body holding a number that no double represents
// exactly (for example 9007199254740993) is refused with 400, so the hash
// always commits to the stored value.
//
// # Merkle tree and checkpoints
//
// Records are the leaves of an RFC 6962 Merkle tree in seq order: leaf i
// (0-based) is record seq i+1, its leaf hash SHA-256(0x00 || canonical
// JSON). The Service keeps every perfect subtree hash in memory (64 bytes
// per record), loaded from the store on New and extended on every append
// in seq order, so roots and inclusion and consistency proofs cost
// O(log n) at any size. Before a checkpoint or proof is served the tree
// catches up with the store, which may hold records appended by another
// process. Checkpoints use the transparency-log checkpoint format (origin,
// tree size, base64 root hash, one per line) in an Ed25519 signed note
// (golang.org/x/mod/sumdb/note); the signing key lives in Options.KeyPath.
// VerifyReceipt, VerifyConsistency and OpenCheckpoint verify offline; they
// and the hashing are those of package oip/verify, which verifiers import
// without the server.
//
// # API types
//
// Record, Receipt, Outcome, History, Checkpoint, Proof and
// ConsistencyProof are aliases of the types of package oip/wire, which
// imports only the standard library, so that package client reads the
// ledger without importing this package.
//
// # Invocations
//
// An invocation {"type": "invocation", "object_key": ROW, "input": {...},
// "execute": bool, "replay_of"?: inv_ID} is recorded under its own key
// (never a directory row's key: a key holds either directory rows or
// invocations and their results). Its stored body names the row version
// (row_inv_ID) and holds the constructed command; an invocation whose
// input does not fit the row, or that asks to execute without authority
// (no Executor configured, or no exec scope), is recorded with an outcome
// of class "refused" and still answered with 201. Execution itself is
// delegated to an Executor: the attempt is recorded first, then the
// result as an invocation_result record whose result_of is the attempt.
// Package oip/runner is the sandboxed Executor; an execution outlives its
// caller's context unless that was marked with CancelExecution.
//
// # Workflows
//
// Invoker implements engine.RowInvoker on a Service: workflow tools and
// background tasks bound to directory rows dispatch executed invocations
// through it, so they are recorded like any other (see Invoker for their
// keys, principals and replay links). EnsureRow installs a row only when
// it changed.
package oip
