// Package runner is the sandboxed executor of OIP invocations (SPEC section
// 9): an execution.Executor that runs the command a directory row builds, within
// what Go and Linux give without root.
//
// # What it enforces
//
//   - An allowlist of programs. Options.Allow names each program by a bare
//     name (looked up on the server's PATH when New runs) or an absolute
//     path. A row's command word is resolved to an absolute path on the
//     execution PATH (Options.Path) or taken as given when it is absolute
//     (relative paths are refused). Both sides are resolved with
//     filepath.EvalSymlinks and must name the same file; in addition the
//     base names must match, because multi-call binaries (busybox, some
//     coreutils builds) choose their behaviour by the name they are
//     called by. Allowing /usr/bin/echo never allows another applet of
//     the same binary. The resolved file itself is executed, with argv[0]
//     as the row gives it.
//   - No shell unless the row's invocation_method is shell. A shell row
//     runs as /bin/sh -c STRING, where STRING is the row's quoted command
//     line (package oip/command quotes every word, the command word too).
//     For a shell row the allowlist must hold /bin/sh (or sh) AND the
//     row's command word, checked as above. The shell itself then looks
//     the command word up (its builtins and the execution PATH first), so
//     a shell row is only as safe as its command string.
//   - A timeout: the row's timeout (seconds), else Options.DefaultTimeout,
//     never more than Options.MaxTimeout. The command runs in its own
//     process group (Setpgid) and the whole group is killed with SIGKILL
//     at the deadline, when the context is cancelled, and as soon as the
//     command itself exits, so children it left behind die too. The
//     direct child also gets SIGKILL if the server process dies
//     (Pdeathsig); grandchildren that escaped into another session are
//     beyond reach.
//   - No stdin (/dev/null) and a minimal environment: PATH (Options.Path),
//     LANG=C.UTF-8 and HOME set to the working directory. Nothing of the
//     server's environment is passed on.
//   - A fresh working directory per execution, created (mode 0700) under
//     Options.Dir and removed afterwards.
//   - Output caps: stdout and stderr are read to the end and hashed
//     (SHA-256) in full, their full sizes counted, but only the first
//     Options.MaxOutput bytes of each are kept. Kept text that is not
//     valid UTF-8 is recorded with U+FFFD replacements (the hash is of the
//     raw bytes).
//   - At most Options.Concurrency executions at once. A call waits for a
//     slot as long as its context allows and at most its own timeout;
//     when none frees up in time the invocation is refused (nothing ran).
//
// # Outcomes
//
// Execute never returns an error: every result is an execution.Outcome. Class
// refused means nothing ran (not allowlisted, not found, no free slot,
// malformed execution); failed means the command ran but exited non-zero,
// was killed (timeout or cancellation; exit_code -1), could not be started,
// or, for output_format json, printed something that is not one JSON
// value; succeeded means exit code 0 (and valid JSON for json rows, parsed
// into Outcome.Output). Reason explains every outcome but success.
//
// The executor runs commands as the server's own OS user, with its
// privileges; it has no seccomp filter, namespaces or resource limits
// beyond the timeout and the concurrency bound. The allowlist and the
// row's fixed argv shape are the security boundary: see docs/SECURITY.md.
package runner
