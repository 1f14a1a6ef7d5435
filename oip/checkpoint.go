package oip

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/oip/verify"
)

// DefaultOrigin is the checkpoint origin line when Options.Origin is empty.
const DefaultOrigin = "asmp.dev/ledger"

// checkpointBody formats the transparency-log checkpoint body.
func checkpointBody(origin string, size uint64, root []byte) string {
	return origin + "\n" + strconv.FormatUint(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root) + "\n"
}

// OpenCheckpoint verifies a signed checkpoint note with the verifier key
// and parses its body (see verify.OpenCheckpoint).
func OpenCheckpoint(signed []byte, verifierKey string) (Checkpoint, error) {
	return verify.OpenCheckpoint(signed, verifierKey)
}

// keyPair is the ledger's signing identity.
type keyPair struct {
	signer note.Signer
	vkey   string // verifier key, public
}

// loadKey returns the signing key kept at path, creating it (mode 0600)
// when the file does not exist. path "" gives an ephemeral key. The key
// file holds one note signer key ("PRIVATE+KEY+name+hash+base64").
func loadKey(path, name string, log *slog.Logger) (keyPair, error) {
	if path == "" {
		skey, _, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			return keyPair{}, fmt.Errorf("oip: generate key: %w", err)
		}
		return parseKey(skey)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createKey(path, name); err != nil && !errors.Is(err, fs.ErrExist) {
			return keyPair{}, err
		} else if err == nil {
			log.Info("created the ledger signing key", "path", path)
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return keyPair{}, fmt.Errorf("oip: read signing key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the ledger signing key file is readable by others; chmod 600 it", "path", path, "mode", fi.Mode().Perm().String())
	}
	kp, err := parseKey(string(bytes.TrimSpace(b)))
	if err != nil {
		return keyPair{}, fmt.Errorf("oip: signing key file %s: %w", path, err)
	}
	return kp, nil
}

// createKey writes a new key file; fs.ErrExist when another process won.
func createKey(path, name string) error {
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return fmt.Errorf("oip: generate key: %w", err)
	}
	// Write a temporary file and link it into place, so that a reader
	// never sees a half-written key and concurrent starts agree on one.
	tmp, err := os.CreateTemp(dirOf(path), ".ledger-key-*")
	if err != nil {
		return fmt.Errorf("oip: create signing key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("oip: create signing key: %w", err)
	}
	if _, err := tmp.WriteString(skey + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("oip: write signing key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("oip: write signing key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("oip: write signing key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		// Some file systems have no hard links: create the file exclusively.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fs.ErrExist
			}
			return fmt.Errorf("oip: install signing key: %w", err)
		}
		_, err = f.WriteString(skey + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return fmt.Errorf("oip: write signing key: %w", err)
		}
	}
	if d, err := os.Open(dirOf(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		if i == 0 {
			return "/"
		}
		return path[:i]
	}
	return "."
}

// parseKey builds the signer and derives the verifier key from a note
// signer key.
func parseKey(skey string) (keyPair, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return keyPair{}, fmt.Errorf("not a signed-note Ed25519 signer key: %w", err)
	}
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return keyPair{}, errors.New("not a signed-note signer key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return keyPair{}, errors.New("not an Ed25519 signer key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return keyPair{}, fmt.Errorf("derive verifier key: %w", err)
	}
	return keyPair{signer: s, vkey: vkey}, nil
}

// sign returns the signed checkpoint note for a tree state.
func (k keyPair) sign(origin string, size uint64, root []byte) (string, error) {
	b, err := note.Sign(&note.Note{Text: checkpointBody(origin, size, root)}, k.signer)
	if err != nil {
		return "", fmt.Errorf("oip: sign checkpoint: %w", err)
	}
	return string(b), nil
}
