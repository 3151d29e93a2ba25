package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/interlockhq/interlock/httpapi"
)

// awaySynopsis says how to run the away command.
const awaySynopsis = `away show
       interlock away set --delegate NAME --to TIME [--from TIME] [--role ROLE ...]
       interlock away end`

// awayCmd runs `interlock away show|set|end`: a person names a delegate
// while they are away, sees whom they decide for, or ends their absence,
// through the HTTP API as the person its token names.
func awayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("away", awaySynopsis, stderr)
	api := fs.String("api", envOr("INTERLOCK_URL", "http://127.0.0.1:8080"), "the HTTP API's `url` (default: $INTERLOCK_URL, else http://127.0.0.1:8080)")
	token := fs.String("token", envOr("INTERLOCK_TOKEN", ""), "your bearer `token`, from interlock people add --token (default: $INTERLOCK_TOKEN)")
	delegate := fs.String("delegate", "", "the `person` who decides for you meanwhile (set)")
	to := fs.String("to", "", "when the absence ends, an RFC 3339 `time` such as 2026-12-24T18:00:00Z (set)")
	from := fs.String("from", "", "when it begins, an RFC 3339 `time` (set; default: now)")
	var roles listFlag
	fs.Var(&roles, "role", "a `role` of yours your delegate holds meanwhile (repeat; default: every one of yours) (set)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 1 {
		return usageOf("away", "away takes show, set or end: interlock %s", awaySynopsis)
	}
	var method string
	var body any
	switch pos[0] {
	case "show":
		method = http.MethodGet
	case "end":
		method = http.MethodDelete
	case "set":
		method = http.MethodPut
		if *delegate == "" || *to == "" {
			return usageOf("away", "away set needs --delegate NAME and --to TIME")
		}
		end, err := time.Parse(time.RFC3339, *to)
		if err != nil {
			return usageOf("away", "--to %q is not an RFC 3339 time such as 2026-12-24T18:00:00Z", *to)
		}
		req := map[string]any{"delegate": *delegate, "to": end}
		if *from != "" {
			begin, err := time.Parse(time.RFC3339, *from)
			if err != nil {
				return usageOf("away", "--from %q is not an RFC 3339 time such as 2026-12-20T09:00:00Z", *from)
			}
			req["from"] = begin
		}
		if len(roles) > 0 {
			req["roles"] = []string(roles)
		}
		body = req
	default:
		return usageOf("away", "unknown away command %q: interlock %s", pos[0], awaySynopsis)
	}
	if method != http.MethodPut && (*delegate != "" || *to != "" || *from != "" || len(roles) > 0) {
		return usageOf("away", "--delegate, --to, --from and --role are for away set")
	}
	if u, err := url.Parse(*api); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageOf("away", "--api %q is not the HTTP API's URL: away talks HTTP, such as http://127.0.0.1:8080 (INTERLOCK_URL may name a NATS server for the clients; give --api then)", *api)
	}
	status, out, err := callAPI(ctx, method, strings.TrimRight(*api, "/")+"/v1/away", *token, body)
	if err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("calling the HTTP API at %s: %w; is `interlock serve` running with --http?", *api, err)}
	}
	if status >= 300 {
		var p httpapi.Problem
		_ = json.Unmarshal(out, &p)
		return &exitError{code: exitRefused, err: fmt.Errorf("the HTTP API answered %d %s: %s", status, p.Code, p.Detail)}
	}
	switch pos[0] {
	case "show":
		var v httpapi.AwayView
		if err := json.Unmarshal(out, &v); err != nil {
			return fmt.Errorf("reading the API's answer: %w", err)
		}
		if v.Away == nil {
			fmt.Fprintln(stdout, "You are not away.")
		} else {
			fmt.Fprintf(stdout, "You are away from %s to %s: %s decides for you%s.\n", v.Away.From.UTC().Format(time.RFC3339), v.Away.To.UTC().Format(time.RFC3339), v.Away.Delegate, rolesText(v.Away.Roles))
		}
		for _, ab := range v.Deciding {
			fmt.Fprintf(stdout, "You decide for %s%s until %s.\n", ab.Person, rolesText(ab.Roles), ab.To.UTC().Format(time.RFC3339))
		}
	case "set":
		var ab httpapi.Absence
		_ = json.Unmarshal(out, &ab)
		fmt.Fprintf(stdout, "You are away from %s to %s: %s decides for you%s. `interlock away end` ends it sooner.\n", ab.From.UTC().Format(time.RFC3339), ab.To.UTC().Format(time.RFC3339), ab.Delegate, rolesText(ab.Roles))
	case "end":
		fmt.Fprintln(stdout, "Your absence is over: what waits on you is yours again.")
	}
	return nil
}

// rolesText says which roles an absence delegates.
func rolesText(roles []string) string {
	if len(roles) == 0 {
		return " (every role)"
	}
	return " (" + strings.Join(roles, ", ") + ")"
}

// callAPI sends one request to the HTTP API, with a bearer token when
// one is given, and returns the status and the body.
func callAPI(ctx context.Context, method, url, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	out, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, out, err
}
