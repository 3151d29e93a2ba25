package a2aremote

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// Agent is a remote A2A agent whose tasks Interlock follows.
type Agent struct {
	// Name names the agent in follow requests and on its asks.
	Name string `yaml:"name"`
	// URL is the agent's base URL, where its Agent Card is
	// (/.well-known/agent-card.json).
	URL string `yaml:"url"`
	// TokenEnv names the environment variable holding the bearer token
	// sent to the agent, so that the file holds no secret; "" sends none.
	TokenEnv string `yaml:"tokenEnv"`
	// ApproverRole and Assignees are who answers the agent's questions:
	// the people of the role, or these people. Without either, anyone
	// the directory knows may answer.
	ApproverRole string   `yaml:"approverRole"`
	Assignees    []string `yaml:"assignees"`

	// token is TokenEnv's value, read when the file is.
	token string
}

// agentName is what an agent's name may be.
var agentName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Parse reads a file of remote agents:
//
//	agents:
//	  - name: billing
//	    url: https://billing.example.com
//	    tokenEnv: BILLING_AGENT_TOKEN
//	    approverRole: support
//
// An error says which agent and field is wrong, and how to fix it.
func Parse(data []byte, source string, getenv func(string) string) ([]Agent, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var doc struct {
		Agents []Agent `yaml:"agents"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w; the file is {agents: [{name, url, tokenEnv, approverRole, assignees}]}", source, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, a := range doc.Agents {
		where := fmt.Sprintf("%s: agents[%d] (%s)", source, i, a.Name)
		if !agentName.MatchString(a.Name) {
			errs = append(errs, fmt.Errorf("%s: name %q: use 1 to 64 of A-Z a-z 0-9 _ -", where, a.Name))
		}
		if seen[a.Name] {
			errs = append(errs, fmt.Errorf("%s: name %q names another agent too", where, a.Name))
		}
		seen[a.Name] = true
		if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			errs = append(errs, fmt.Errorf("%s: url %q: use the agent's base URL, http or https, without user or password (its token goes in tokenEnv)", where, a.URL))
		}
		if a.TokenEnv != "" {
			if doc.Agents[i].token = getenv(a.TokenEnv); doc.Agents[i].token == "" {
				errs = append(errs, fmt.Errorf("%s: tokenEnv %s is not set or empty: export the agent's token in it", where, a.TokenEnv))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return doc.Agents, nil
}
