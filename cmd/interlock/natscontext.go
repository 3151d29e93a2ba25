package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// natsContext is the part of a natscli context file the client commands
// use (`nats context save NAME` writes ~/.config/nats/context/NAME.json).
type natsContext struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
	NKey     string `json:"nkey"`
	Token    string `json:"token"`
	UserJWT  string `json:"user_jwt"`
	// InboxPrefix is the prefix of the connection's reply subjects: a
	// client user of a secured deployment reads replies only on its own.
	InboxPrefix string `json:"inbox_prefix"`
}

// contextPath returns the file of a natscli context: name itself when it
// is a path to a .json file, else <config>/nats/context/<name>.json, where
// config is $XDG_CONFIG_HOME or ~/.config.
func contextPath(name string) (string, error) {
	if strings.HasSuffix(name, ".json") || strings.ContainsRune(name, os.PathSeparator) {
		return name, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the natscli context %q: %w; give the context file's path instead", name, err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

// loadNATSContext reads a natscli context by name or path.
func loadNATSContext(name string) (natsContext, error) {
	path, err := contextPath(name)
	if err != nil {
		return natsContext{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return natsContext{}, fmt.Errorf("reading the natscli context %q: %w (`nats context ls` lists the saved ones)", name, err)
	}
	var c natsContext
	if err := json.Unmarshal(b, &c); err != nil {
		return natsContext{}, fmt.Errorf("natscli context %s is not valid JSON: %w", path, err)
	}
	switch {
	case c.NKey != "":
		return natsContext{}, fmt.Errorf("natscli context %q signs in with an nkey, which interlock does not support; use a creds file, a user and password, or TLS certificates", name)
	case c.Token != "":
		return natsContext{}, fmt.Errorf("natscli context %q signs in with a token, which interlock does not support; use a creds file, a user and password, or TLS certificates", name)
	case c.UserJWT != "":
		return natsContext{}, fmt.Errorf("natscli context %q signs in with a user JWT, which interlock does not support; use a creds file instead", name)
	}
	c.Creds, c.Cert, c.Key, c.CA = expandHome(c.Creds), expandHome(c.Cert), expandHome(c.Key), expandHome(c.CA)
	return c, nil
}

// expandHome replaces a leading ~/ with the home directory, as natscli does.
func expandHome(p string) string {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, rest)
}
