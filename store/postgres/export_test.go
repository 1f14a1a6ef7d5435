package postgres

// HoldCommits makes the store's committer wait, once the next group's
// first commit has arrived, until release is called: commits queued
// meanwhile join that group.
func HoldCommits(s *Store) (release func()) { return s.holdCommits() }

// SchemaOf is the schema holding s's tables.
func SchemaOf(s *Store) string { return s.schema }
