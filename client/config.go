package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Config is a client discovery config (spec/CLIENT_CONFIG.json): the ASMP
// servers a client may connect to.
type Config struct {
	Servers []ServerConfig `json:"servers"`
}

// ServerConfig is one server of a Config.
type ServerConfig struct {
	// ID names the server (e.g. "legal-review"); "" means BaseURL.
	ID string `json:"id,omitempty"`
	// BaseURL is the server's API base URL.
	BaseURL string `json:"base_url"`
}

// Key returns the server's id, or its base URL when it has none.
func (s ServerConfig) Key() string {
	if s.ID != "" {
		return s.ID
	}
	return s.BaseURL
}

// LoadConfig reads a discovery config file and checks it against
// CLIENT_CONFIG.json.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a discovery config and checks it against
// CLIENT_CONFIG.json, that every base URL is an http(s) URL, and that ids
// are unique.
func ParseConfig(b []byte) (*Config, error) {
	if err := checkConfigShape(b); err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not a client config: %w", err)
	}
	seen := map[string]bool{}
	for i, s := range c.Servers {
		if _, err := ParseBaseURL(s.BaseURL); err != nil {
			return nil, fmt.Errorf("servers[%d]: %w", i, err)
		}
		if seen[s.Key()] {
			return nil, fmt.Errorf("servers[%d]: id %q is given twice", i, s.Key())
		}
		seen[s.Key()] = true
	}
	return &c, nil
}

// checkConfigShape checks b against CLIENT_CONFIG.json by hand, so that
// the SDK needs no JSON Schema validator: an object whose "servers", when
// present, is an array of objects, each with a string "base_url" and, when
// present, a string "id". Other members are allowed, as the schema allows
// them. (A test checks that this agrees with the schema.)
func checkConfigShape(b []byte) error {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("not a client config: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return errors.New("not a client config: more than one JSON value")
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return errors.New(`not a client config: it must be a JSON object, e.g. {"servers": [{"id": "local", "base_url": "http://127.0.0.1:8000"}]}`)
	}
	raw, ok := top["servers"]
	if !ok {
		return nil
	}
	servers, ok := raw.([]any)
	if !ok {
		return errors.New(`servers must be an array of {"id", "base_url"} objects`)
	}
	for i, v := range servers {
		s, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf(`servers[%d] must be an object with a "base_url"`, i)
		}
		u, ok := s["base_url"]
		if !ok {
			return fmt.Errorf("servers[%d]: base_url is required", i)
		}
		if _, ok := u.(string); !ok {
			return fmt.Errorf("servers[%d]: base_url must be a string (an http or https URL)", i)
		}
		if id, ok := s["id"]; ok {
			if _, ok := id.(string); !ok {
				return fmt.Errorf("servers[%d]: id must be a string", i)
			}
		}
	}
	return nil
}

// Registry holds the servers a client knows: those of a Config, plus any
// added at run time. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	servers []ServerConfig
	opts    *Options
}

// NewRegistry returns a registry of cfg's servers (cfg may be nil). opts
// configure the clients Client returns.
func NewRegistry(cfg *Config, opts *Options) (*Registry, error) {
	r := &Registry{opts: opts}
	if cfg != nil {
		for _, s := range cfg.Servers {
			if err := r.Add(s); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Add registers a server. Its base URL must be valid and its id (or base
// URL, when it has no id) not yet taken.
func (r *Registry) Add(s ServerConfig) error {
	if _, err := ParseBaseURL(s.BaseURL); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.servers {
		if have.Key() == s.Key() {
			return fmt.Errorf("server %q is already registered", s.Key())
		}
	}
	r.servers = append(r.servers, s)
	return nil
}

// Lookup returns the server with id (or with that base URL, for servers
// without an id).
func (r *Registry) Lookup(id string) (ServerConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.servers {
		if s.Key() == id {
			return s, true
		}
	}
	return ServerConfig{}, false
}

// Servers returns the registered servers in the order they were added.
func (r *Registry) Servers() []ServerConfig {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]ServerConfig(nil), r.servers...)
}

// Client returns a client of the server with id.
func (r *Registry) Client(id string) (*Client, error) {
	s, ok := r.Lookup(id)
	if !ok {
		return nil, fmt.Errorf("no server %q is registered", id)
	}
	return New(s.BaseURL, r.opts)
}
