package mcpgateway

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"
)

// Defaults of [Config].
const (
	// DefaultWait is how long a call that needs approval waits for the
	// decision before the model is told that it awaits approval.
	DefaultWait = 30 * time.Second
	// DefaultRepeatWindow is how long a decision answers an identical
	// call (the same tool, args and agent) instead of asking again.
	DefaultRepeatWindow = 15 * time.Minute
	// DefaultAgent names the agent in gate requests when the MCP client
	// gives no name when it connects.
	DefaultAgent = "mcp-client"
	// Separator joins an upstream's name and a tool's name when the
	// gateway prefixes the tool: files__read_file.
	Separator = "__"
)

// Prefix modes of an [Upstream].
const (
	// PrefixAuto shows a tool as is, unless another upstream has a tool
	// of the same name: then both are prefixed.
	PrefixAuto = "auto"
	// PrefixAlways shows every tool of the upstream as
	// <upstream>__<tool>.
	PrefixAlways = "always"
	// PrefixNever shows every tool as is; a name another upstream also
	// shows is an error.
	PrefixNever = "never"
)

// Config configures a [Gateway].
type Config struct {
	// Upstreams are the MCP servers whose tools the gateway shows and
	// gates. At least one.
	Upstreams []Upstream `yaml:"upstreams"`
	// Agent names the agent in every gate request, for the rules
	// (agent == "...") and the approver. Defaults to the name the MCP
	// client gives when it connects, else DefaultAgent.
	Agent string `yaml:"agent"`
	// Wait is how long a call that needs approval waits for the
	// decision; then the model is told it awaits approval, with its
	// callId. Defaults to DefaultWait.
	Wait time.Duration `yaml:"wait"`
	// RepeatWindow is how long a decision answers an identical later
	// call (same tool, args and agent) instead of asking people again.
	// Defaults to DefaultRepeatWindow.
	RepeatWindow time.Duration `yaml:"repeatWindow"`
	// Stderr receives what upstream commands write to their standard
	// error. Defaults to nowhere (discarded).
	Stderr io.Writer `yaml:"-"`
	// Logger receives what the gateway notices: a tool renamed or
	// shadowed by another upstream's, a decision about another call.
	// Defaults to a disabled logger.
	Logger *zerolog.Logger `yaml:"-"`
}

// Upstream is an MCP server behind the gateway: a command it starts and
// speaks to on stdio, or a streamable HTTP URL.
type Upstream struct {
	// Name names the upstream, in prefixed tool names and errors:
	// letters, digits, - and _. Required.
	Name string `yaml:"name"`
	// Command is the program that serves MCP on its stdio, with Args
	// and, added to the gateway's environment, Env. Set Command or URL.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// URL is the streamable HTTP endpoint of a running MCP server. Set
	// Command or URL.
	URL string `yaml:"url"`
	// Prefix says how the upstream's tools are named: auto, always or
	// never (see PrefixAuto). Defaults to PrefixAuto.
	Prefix string `yaml:"prefix"`
	// Transport, when set, is used instead of Command and URL: an
	// in-process upstream. It is connected once, by Start.
	Transport mcp.Transport `yaml:"-"`
}

// upstreamName is what an upstream's name may be: it becomes part of tool
// names, which MCP clients restrict to these characters.
var upstreamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	c.RepeatWindow = cmp.Or(c.RepeatWindow, DefaultRepeatWindow)
	ups := make([]Upstream, len(c.Upstreams))
	for i, u := range c.Upstreams {
		u.Prefix = cmp.Or(u.Prefix, PrefixAuto)
		ups[i] = u
	}
	c.Upstreams = ups
	return c
}

func (c Config) validate() error {
	if len(c.Upstreams) == 0 {
		return errors.New("mcpgateway: no upstreams: list at least one MCP server under upstreams, with a name and a command or a url")
	}
	switch {
	case c.Wait < 0:
		return fmt.Errorf("mcpgateway: wait is %s; give a positive duration such as 30s", c.Wait)
	case c.RepeatWindow < 0:
		return fmt.Errorf("mcpgateway: repeatWindow is %s; give a positive duration such as 15m", c.RepeatWindow)
	}
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		at := fmt.Sprintf("upstreams[%d]", i)
		if u.Name != "" {
			at += " (" + u.Name + ")"
		}
		switch {
		case !upstreamName.MatchString(u.Name):
			return fmt.Errorf("mcpgateway: %s: name %q: give 1 to 64 of letters, digits, - and _, such as files", at, u.Name)
		case strings.Contains(u.Name, Separator):
			return fmt.Errorf("mcpgateway: %s: name %q holds %q, which joins the upstream's name to its tools' names: choose a name without it", at, u.Name, Separator)
		case seen[u.Name]:
			return fmt.Errorf("mcpgateway: %s: another upstream is named %s: give each its own name", at, u.Name)
		case u.Transport == nil && u.Command == "" && u.URL == "":
			return fmt.Errorf("mcpgateway: %s: give a command (an MCP server on stdio) or a url (a streamable HTTP endpoint)", at)
		case u.Transport == nil && u.Command != "" && u.URL != "":
			return fmt.Errorf("mcpgateway: %s: give a command or a url, not both", at)
		case u.URL != "" && (len(u.Args) > 0 || len(u.Env) > 0):
			return fmt.Errorf("mcpgateway: %s: args and env go with a command, not with a url", at)
		}
		if u.URL != "" {
			p, err := url.Parse(u.URL)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return fmt.Errorf("mcpgateway: %s: url %q is not an http or https URL; give the server's streamable HTTP endpoint, such as http://127.0.0.1:9000/mcp", at, u.URL)
			}
		}
		switch u.Prefix {
		case "", PrefixAuto, PrefixAlways, PrefixNever:
		default:
			return fmt.Errorf("mcpgateway: %s: prefix %q: use auto (as is unless another upstream has the same tool), always (%s%stool) or never", at, u.Prefix, u.Name, Separator)
		}
		seen[u.Name] = true
	}
	return nil
}

// ParseConfig reads a gateway's YAML configuration; name names the file
// in errors.
//
//	wait: 30s
//	upstreams:
//	  - name: files
//	    command: mcp-server-filesystem
//	    args: ["/srv/shared"]
//	  - name: billing
//	    url: http://127.0.0.1:9000/mcp
//	    prefix: always
func ParseConfig(data []byte, name string) (Config, error) {
	var raw struct {
		Upstreams    []Upstream `yaml:"upstreams"`
		Agent        string     `yaml:"agent"`
		Wait         string     `yaml:"wait"`
		RepeatWindow string     `yaml:"repeatWindow"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("mcpgateway: %s is empty: list the MCP servers to front under upstreams, each with a name and a command or a url", name)
		}
		return Config{}, fmt.Errorf("mcpgateway: %s: %s (the fields are upstreams, agent, wait and repeatWindow; an upstream's are name, command, args, env, url and prefix)", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	cfg := Config{Upstreams: raw.Upstreams, Agent: raw.Agent}
	for _, d := range []struct {
		field, s string
		to       *time.Duration
	}{{"wait", raw.Wait, &cfg.Wait}, {"repeatWindow", raw.RepeatWindow, &cfg.RepeatWindow}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil || v <= 0 {
			return Config{}, fmt.Errorf("mcpgateway: %s: %s %q is not a positive duration; write one such as 30s, 15m or 1h", name, d.field, d.s)
		}
		*d.to = v
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("mcpgateway: %s: %s", name, strings.TrimPrefix(err.Error(), "mcpgateway: "))
	}
	return cfg, nil
}
