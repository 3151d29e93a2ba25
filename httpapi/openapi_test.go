package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
)

// openAPIDoc is the part of an OpenAPI document the test reads.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas   map[string]json.RawMessage `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type openAPIOperation struct {
	Responses map[string]json.RawMessage `json:"responses"`
}

type openAPIResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"content"`
}

// TestOpenAPIDocumentsTheHandlers checks the embedded OpenAPI document
// against the real handlers: every route the server serves is documented,
// every documented route is served, and every documented status of every
// operation is answered, with the documented content type and a body that
// fits the documented schema.
func TestOpenAPIDocumentsTheHandlers(t *testing.T) {
	t.Parallel()
	var doc openAPIDoc
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}

	local := startAPI(t, nil)
	auth, samToken, bobToken := writeAuth(t)
	secured := local.withAuth(t, auth)
	sam, bob := secured.as(samToken), secured.as(bobToken)

	// The routes the mux serves are the documented ones.
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	served := local.server.Routes()
	sort.Strings(documented)
	sort.Strings(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented routes %v, served %v", documented, served)
	}

	// Runs the cases stand on.
	local.accepted("POST", "/v1/runs/booking", map[string]any{"run": "o-wait"})
	local.accepted("POST", "/v1/runs/booking", map[string]any{"run": "o-cancel"})
	local.accepted("POST", "/v1/runs/booking", map[string]any{"run": "o-done"})
	local.accepted("POST", "/v1/runs/booking/o-done/cancel", nil)
	local.accepted("POST", "/v1/runs/refund", map[string]any{"run": "o-refund", "state": refundState(nil)["state"]})
	local.accepted("POST", "/v1/runs/refund", map[string]any{"run": "o-late", "state": refundState(map[string]any{"approvalTimeoutSeconds": 1})["state"]})
	local.accepted("POST", "/v1/runs/refund", map[string]any{"run": "o-cb", "state": refundState(nil)["state"]})
	local.accepted("POST", "/v1/runs/refund", map[string]any{"run": "o-cb2", "state": refundState(nil)["state"]})
	// Callback URLs the cases use, and links made by hand: one expired,
	// one for somebody the auth file does not hold.
	var minted links.Callback
	mint := func(run string) string {
		sam.must(http.StatusCreated, "POST", "/v1/runs/refund/"+run+"/callbacks", nil).decode(t, &minted)
		return strings.TrimPrefix(minted.URL, secured.server.PublicURL())
	}
	cbPath, cbPath2 := mint("o-cb"), mint("o-cb2")
	sign := func(person string, expires time.Time) string {
		text, err := local.svc.Links().Sign(links.Claims{Kind: links.KindCallback, Flow: "refund", Run: "o-cb2", RequestID: minted.RequestID, Person: person, Expires: expires.Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return links.CallbackPath + text
	}
	expiredPath, strangerPath := sign("sam@example.com", time.Now().Add(-time.Minute)), sign("mallory", time.Now().Add(time.Hour))
	stale := local.run("booking", "o-wait").Checkpoint.Checkpoint + 5

	// A body the API reads, whose command is larger than a NATS message.
	pad := strings.Repeat("x", httpapi.MaxBody-100)
	badHost := []string{"Host", "evil.example"}
	crossSite := []string{"Sec-Fetch-Site", "cross-site"}
	cases := []struct {
		route  string // METHOD /path as documented
		status int
		do     func() response
	}{
		{"GET /v1/interrupts", 200, func() response { return local.do("GET", "/v1/interrupts?kind=question&limit=2", nil) }},
		{"GET /v1/interrupts", 400, func() response { return local.do("GET", "/v1/interrupts?limit=0", nil) }},
		{"GET /v1/interrupts", 401, func() response { return secured.do("GET", "/v1/interrupts", nil) }},
		{"GET /v1/interrupts", 403, func() response { return local.do("GET", "/v1/interrupts", nil, badHost...) }},

		{"GET /v1/runs", 200, func() response { return local.do("GET", "/v1/runs?limit=20", nil) }},
		{"GET /v1/runs", 400, func() response { return local.do("GET", "/v1/runs?status=running", nil) }},
		{"GET /v1/runs", 401, func() response { return secured.do("GET", "/v1/runs", nil) }},
		{"GET /v1/runs", 403, func() response { return local.do("GET", "/v1/runs", nil, badHost...) }},

		{"GET /v1/runs/{flow}/{run}", 200, func() response { return local.do("GET", "/v1/runs/booking/o-wait", nil) }},
		{"GET /v1/runs/{flow}/{run}", 400, func() response { return local.do("GET", "/v1/runs/booking/o.wait", nil) }},
		{"GET /v1/runs/{flow}/{run}", 401, func() response { return secured.as("wrong").do("GET", "/v1/runs/booking/o-wait", nil) }},
		{"GET /v1/runs/{flow}/{run}", 403, func() response { return local.do("GET", "/v1/runs/booking/o-wait", nil, badHost...) }},
		{"GET /v1/runs/{flow}/{run}", 404, func() response { return local.do("GET", "/v1/runs/booking/o-none", nil) }},

		{"POST /v1/runs/{flow}", 202, func() response {
			return local.do("POST", "/v1/runs/booking", map[string]any{"state": map[string]any{"name": "Ada"}})
		}},
		{"POST /v1/runs/{flow}", 400, func() response { return local.do("POST", "/v1/runs/booking", `{"stat":{}}`) }},
		{"POST /v1/runs/{flow}", 401, func() response { return secured.do("POST", "/v1/runs/booking", nil) }},
		{"POST /v1/runs/{flow}", 403, func() response { return sam.do("POST", "/v1/runs/booking", nil, crossSite...) }},
		{"POST /v1/runs/{flow}", 404, func() response { return local.do("POST", "/v1/runs/nope", nil) }},
		{"POST /v1/runs/{flow}", 409, func() response { return local.do("POST", "/v1/runs/booking", map[string]any{"run": "o-wait"}) }},

		{"POST /v1/runs/{flow}/{run}/resume", 202, func() response {
			return local.do("POST", "/v1/runs/booking/o-wait/resume", map[string]any{"answers": map[string]any{"email": "ada@example.com"}})
		}},
		{"POST /v1/runs/{flow}/{run}/resume", 400, func() response { return local.do("POST", "/v1/runs/booking/o-wait/resume", `{"anwsers":{}}`) }},
		{"POST /v1/runs/{flow}/{run}/resume", 401, func() response {
			return secured.do("POST", "/v1/runs/refund/o-refund/resume", `{"decision":"approve"}`)
		}},
		{"POST /v1/runs/{flow}/{run}/resume", 403, func() response { return bob.do("POST", "/v1/runs/refund/o-refund/resume", `{"decision":"approve"}`) }},
		{"POST /v1/runs/{flow}/{run}/resume", 404, func() response {
			return local.do("POST", "/v1/runs/booking/o-none/resume", `{"answers":{"email":"a@b.c"}}`)
		}},
		{"POST /v1/runs/{flow}/{run}/resume", 409, func() response {
			return local.do("POST", "/v1/runs/booking/o-wait/resume", fmt.Sprintf(`{"answers":{"name":"Ada"},"expectedCheckpoint":%d}`, stale))
		}},
		{"POST /v1/runs/{flow}/{run}/resume", 410, func() response {
			natstest.Eventually(t, "o-late expires", func() bool { return local.run("refund", "o-late").Status == "expired" })
			return local.do("POST", "/v1/runs/refund/o-late/resume", `{"decision":"approve"}`)
		}},
		{"POST /v1/runs/{flow}/{run}/resume", 422, func() response {
			return sam.do("POST", "/v1/runs/refund/o-refund/resume", `{"decision":"edit","edits":{"amount":9000}}`)
		}},

		{"POST /v1/runs/{flow}/{run}/cancel", 202, func() response { return local.do("POST", "/v1/runs/booking/o-cancel/cancel", `{"reason":"test"}`) }},
		{"POST /v1/runs/{flow}/{run}/cancel", 400, func() response { return local.do("POST", "/v1/runs/booking/o-cancel/cancel", `{"by":"mallory"}`) }},
		{"POST /v1/runs/{flow}/{run}/cancel", 401, func() response { return secured.do("POST", "/v1/runs/booking/o-cancel/cancel", nil) }},
		{"POST /v1/runs/{flow}/{run}/cancel", 403, func() response { return local.do("POST", "/v1/runs/booking/o-cancel/cancel", nil, crossSite...) }},
		{"POST /v1/runs/{flow}/{run}/cancel", 404, func() response { return local.do("POST", "/v1/runs/booking/o-none/cancel", nil) }},
		{"POST /v1/runs/{flow}/{run}/cancel", 409, func() response { return local.do("POST", "/v1/runs/booking/o-done/cancel", nil) }},

		{"POST /v1/runs/{flow}/{run}/assign", 202, func() response { return sam.do("POST", "/v1/runs/refund/o-refund/assign", `{"op":"claim"}`) }},
		{"POST /v1/runs/{flow}/{run}/assign", 400, func() response {
			return sam.do("POST", "/v1/runs/refund/o-refund/assign", `{"op":"claim","by":"mallory"}`)
		}},
		{"POST /v1/runs/{flow}/{run}/assign", 401, func() response { return secured.do("POST", "/v1/runs/refund/o-refund/assign", `{"op":"claim"}`) }},
		{"POST /v1/runs/{flow}/{run}/assign", 403, func() response { return bob.do("POST", "/v1/runs/refund/o-refund/assign", `{"op":"claim"}`) }},
		{"POST /v1/runs/{flow}/{run}/assign", 404, func() response { return local.do("POST", "/v1/runs/refund/o-none/assign", `{"op":"claim"}`) }},
		{"POST /v1/runs/{flow}/{run}/assign", 409, func() response { return local.do("POST", "/v1/runs/booking/o-done/assign", `{"op":"claim"}`) }},
		{"POST /v1/runs/{flow}/{run}/assign", 410, func() response {
			natstest.Eventually(t, "o-late expires", func() bool { return local.run("refund", "o-late").Status == "expired" })
			return local.do("POST", "/v1/runs/refund/o-late/assign", `{"op":"claim"}`)
		}},
		{"POST /v1/runs/{flow}/{run}/assign", 413, func() response {
			return local.do("POST", "/v1/runs/refund/o-refund/assign", `{"op":"claim","reason":"`+pad+`"}`)
		}},

		{"POST /v1/runs/{flow}/{run}/callbacks", 400, func() response { return sam.do("POST", "/v1/runs/refund/o-cb/callbacks", `{"request":"x"}`) }},
		{"POST /v1/runs/{flow}/{run}/callbacks", 401, func() response { return secured.do("POST", "/v1/runs/refund/o-cb/callbacks", nil) }},
		{"POST /v1/runs/{flow}/{run}/callbacks", 403, func() response { return bob.do("POST", "/v1/runs/refund/o-cb/callbacks", nil) }},
		{"POST /v1/runs/{flow}/{run}/callbacks", 404, func() response { return sam.do("POST", "/v1/runs/refund/o-none/callbacks", nil) }},
		{"POST /v1/runs/{flow}/{run}/callbacks", 409, func() response { return sam.do("POST", "/v1/runs/booking/o-done/callbacks", nil) }},

		{"POST /v1/callbacks/{link}", 400, func() response { return secured.do("POST", cbPath, `{"resumeToken":"t","decision":"approve"}`) }},
		{"POST /v1/callbacks/{link}", 403, func() response { return secured.do("POST", strangerPath, `{"decision":"approve"}`) }},
		{"POST /v1/callbacks/{link}", 404, func() response { return secured.do("POST", cbPath+"x", `{"decision":"approve"}`) }},
		{"POST /v1/callbacks/{link}", 410, func() response { return secured.do("POST", expiredPath, `{"decision":"approve"}`) }},
		{"POST /v1/callbacks/{link}", 413, func() response { return secured.do("POST", cbPath, `{"decision":"approve","reason":"`+pad+`"}`) }},
		{"POST /v1/callbacks/{link}", 422, func() response { return secured.do("POST", cbPath, `{"decision":"edit","edits":{"amount":9000}}`) }},
		{"POST /v1/callbacks/{link}", 202, func() response { return secured.do("POST", cbPath, `{"decision":"approve"}`) }},
		{"POST /v1/callbacks/{link}", 409, func() response { return secured.do("POST", cbPath, `{"decision":"approve"}`) }},
		{"POST /v1/runs/{flow}/{run}/callbacks", 201, func() response { return sam.do("POST", "/v1/runs/refund/o-cb2/callbacks", `{}`) }},
		{"POST /v1/callbacks/{link}", 403, func() response { return secured.do("POST", cbPath2, `{"decision":"approve"}`, crossSite...) }},

		{"POST /v1/gate/requests", 200, func() response {
			return local.do("POST", "/v1/gate/requests", `{"callId":"o-call-1","tool":"issue_refund","args":{"amount":20}}`)
		}},
		{"POST /v1/gate/requests", 202, func() response {
			return local.do("POST", "/v1/gate/requests?wait=1s", `{"callId":"o-call-2","tool":"issue_refund","args":{"amount":2000}}`)
		}},
		{"POST /v1/gate/requests", 400, func() response { return local.do("POST", "/v1/gate/requests", `{"callId":"o-call-3"}`) }},
		{"POST /v1/gate/requests", 401, func() response { return secured.do("POST", "/v1/gate/requests", `{}`) }},
		{"POST /v1/gate/requests", 501, func() response {
			off := startAPIOn(t, httpapi.Config{Addr: "127.0.0.1:0"}, nil)
			return off.do("POST", "/v1/gate/requests", `{"callId":"o-call-off","tool":"issue_refund","args":{"amount":20}}`)
		}},
		{"POST /v1/gate/requests", 403, func() response { return local.do("POST", "/v1/gate/requests", `{}`, crossSite...) }},

		{"POST /v1/gate/requests/{callId}/consume", 400, func() response {
			return local.do("POST", "/v1/gate/requests/o-call-2/consume", `{"argsDigest":"x"}`)
		}},
		{"POST /v1/gate/requests/{callId}/consume", 401, func() response { return secured.do("POST", "/v1/gate/requests/o-call-2/consume", `{}`) }},
		{"POST /v1/gate/requests/{callId}/consume", 403, func() response {
			return local.do("POST", "/v1/gate/requests/o-call-2/consume", `{}`, crossSite...)
		}},
		{"POST /v1/gate/requests/{callId}/consume", 404, func() response {
			return local.do("POST", "/v1/gate/requests/o-call-none/consume", `{"argsDigest":"`+strings.Repeat("0", 64)+`"}`)
		}},
		{"POST /v1/gate/requests/{callId}/consume", 409, func() response {
			return local.do("POST", "/v1/gate/requests/o-call-2/consume", `{"argsDigest":"`+strings.Repeat("0", 64)+`"}`)
		}},
		{"POST /v1/gate/requests/{callId}/consume", 200, func() response {
			local.accepted("POST", "/v1/runs/gate/o-call-2/resume", `{"decision":"approve"}`)
			var ans httpapi.GateAnswer
			local.must(http.StatusOK, "POST", "/v1/gate/requests", `{"callId":"o-call-2","tool":"issue_refund","args":{"amount":2000}}`).decode(t, &ans)
			return local.do("POST", "/v1/gate/requests/o-call-2/consume", `{"argsDigest":"`+ans.Decided.FinalDigest+`"}`)
		}},

		{"PUT /v1/away", 201, func() response {
			return sam.do("PUT", "/v1/away", map[string]any{"delegate": "bob", "to": time.Now().Add(time.Hour)})
		}},
		{"PUT /v1/away", 409, func() response {
			return sam.do("PUT", "/v1/away", map[string]any{"delegate": "bob", "to": time.Now().Add(time.Hour)})
		}},
		{"PUT /v1/away", 400, func() response {
			return bob.do("PUT", "/v1/away", map[string]any{"delegate": "bob", "to": time.Now().Add(time.Hour)})
		}},
		{"PUT /v1/away", 401, func() response { return secured.do("PUT", "/v1/away", `{}`) }},
		{"PUT /v1/away", 403, func() response { return sam.do("PUT", "/v1/away", `{}`, crossSite...) }},
		{"GET /v1/away", 200, func() response { return bob.do("GET", "/v1/away", nil) }},
		{"GET /v1/away", 401, func() response { return secured.do("GET", "/v1/away", nil) }},
		{"GET /v1/away", 403, func() response { return local.do("GET", "/v1/away", nil, badHost...) }},
		{"DELETE /v1/away", 200, func() response { return sam.do("DELETE", "/v1/away", nil) }},
		{"DELETE /v1/away", 404, func() response { return bob.do("DELETE", "/v1/away", nil) }},
		{"DELETE /v1/away", 401, func() response { return secured.do("DELETE", "/v1/away", nil) }},
		{"DELETE /v1/away", 403, func() response { return sam.do("DELETE", "/v1/away", nil, crossSite...) }},

		{"GET /v1/audit/keys", 200, func() response { return secured.do("GET", "/v1/audit/keys", nil) }},
		{"GET /v1/audit/keys", 403, func() response { return local.do("GET", "/v1/audit/keys", nil, badHost...) }},

		{"POST /v1/asks", 202, func() response {
			return local.do("POST", "/v1/asks", `{"askId":"o-ask-1","interrupt":{"kind":"choice","question":"Which?","options":[{"id":"a","label":"A"}]}}`)
		}},
		{"POST /v1/asks", 400, func() response { return local.do("POST", "/v1/asks", `{"askId":"o-ask-2"}`) }},
		{"POST /v1/asks", 401, func() response { return secured.do("POST", "/v1/asks", `{}`) }},
		{"POST /v1/asks", 403, func() response { return local.do("POST", "/v1/asks", `{}`, crossSite...) }},
		{"POST /v1/asks", 413, func() response {
			return local.do("POST", "/v1/asks", `{"askId":"o-ask-big","interrupt":{"kind":"choice","question":"`+pad+`","options":[{"id":"a","label":"A"}]}}`)
		}},
		{"GET /v1/asks/{askId}", 202, func() response { return local.do("GET", "/v1/asks/o-ask-1", nil) }},
		{"GET /v1/asks/{askId}", 200, func() response {
			local.accepted("POST", "/v1/runs/ask/o-ask-1/resume", `{"selected":["a"]}`)
			return local.do("GET", "/v1/asks/o-ask-1?wait=10s", nil)
		}},
		{"POST /v1/asks", 200, func() response {
			return local.do("POST", "/v1/asks?wait=1s", `{"askId":"o-ask-1","interrupt":{"kind":"choice","question":"Which?","options":[{"id":"a","label":"A"}]}}`)
		}},
		{"GET /v1/asks/{askId}", 400, func() response { return local.do("GET", "/v1/asks/o.ask", nil) }},
		{"GET /v1/asks/{askId}", 401, func() response { return secured.do("GET", "/v1/asks/o-ask-1", nil) }},
		{"GET /v1/asks/{askId}", 403, func() response { return local.do("GET", "/v1/asks/o-ask-1", nil, badHost...) }},
		{"GET /v1/asks/{askId}", 404, func() response { return local.do("GET", "/v1/asks/o-ask-none", nil) }},

		{"POST /v1/runs/{flow}", 413, func() response { return local.do("POST", "/v1/runs/booking", `{"state":{"name":"`+pad+`"}}`) }},
		{"POST /v1/runs/{flow}/{run}/resume", 413, func() response {
			return local.do("POST", "/v1/runs/booking/o-wait/resume", `{"answers":{"email":"`+pad+`"}}`)
		}},
		{"POST /v1/runs/{flow}/{run}/cancel", 413, func() response {
			return local.do("POST", "/v1/runs/booking/o-wait/cancel", `{"reason":"`+pad+`"}`)
		}},
		{"POST /v1/gate/requests", 413, func() response {
			return local.do("POST", "/v1/gate/requests", `{"callId":"c-big","tool":"issue_refund","args":{"memo":"`+pad+`"}}`)
		}},

		{"GET /v1/events", 200, func() response { return local.head("/v1/events?flow=booking") }},
		{"GET /v1/events", 400, func() response { return local.do("GET", "/v1/events?kind=nope", nil) }},
		{"GET /v1/events", 401, func() response { return secured.do("GET", "/v1/events", nil) }},
		{"GET /v1/events", 403, func() response { return local.do("GET", "/v1/events", nil, badHost...) }},

		{"GET /v1/openapi.json", 200, func() response { return secured.do("GET", "/v1/openapi.json", nil) }},
		{"GET /v1/openapi.json", 403, func() response { return local.do("GET", "/v1/openapi.json", nil, badHost...) }},
	}

	covered := map[string]bool{}
	for _, c := range cases {
		r := c.do()
		method, path, _ := strings.Cut(c.route, " ")
		name := fmt.Sprintf("%s %d", c.route, c.status)
		if r.status != c.status {
			t.Errorf("%s: answered %d %s", name, r.status, r.body)
			continue
		}
		covered[name] = true
		var op openAPIOperation
		if err := json.Unmarshal(doc.Paths[path][strings.ToLower(method)], &op); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, ok := op.Responses[strconv.Itoa(c.status)]
		if !ok {
			t.Errorf("%s: status not documented", name)
			continue
		}
		resp := doc.response(t, raw)
		ct, _, _ := strings.Cut(r.header.Get("Content-Type"), ";")
		media, ok := resp.Content[ct]
		if !ok {
			t.Errorf("%s: Content-Type %q is not documented (%v)", name, ct, resp.Content)
			continue
		}
		if strings.HasSuffix(ct, "json") && c.route != "GET /v1/openapi.json" {
			var body any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Errorf("%s: body %s: %v", name, r.body, err)
				continue
			}
			if err := doc.validate(media.Schema, body, "body"); err != nil {
				t.Errorf("%s: %v\n%s", name, err, r.body)
			}
		}
	}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			for status := range op.Responses {
				if name := strings.ToUpper(method) + " " + path + " " + status; status != "default" && !covered[name] {
					t.Errorf("%s is documented; no case answers it", name)
				}
			}
		}
	}
}

// withAuth returns an API with auth on the same service.
func (a *api) withAuth(t *testing.T, auth *httpapi.AuthFile) *api {
	t.Helper()
	s, err := httpapi.New(a.svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth, Links: a.svc.Links(), Uses: a.svc.LinkUses()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return &api{t: t, svc: a.svc, server: s, base: "http://" + s.Addr()}
}

// head sends a GET and returns the answer's status and headers, without
// waiting for a body that does not end.
func (a *api) head(path string) response {
	a.t.Helper()
	ctx, cancel := context.WithCancel(a.t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	return response{status: res.StatusCode, header: res.Header}
}

// response resolves a response object.
func (d *openAPIDoc) response(t *testing.T, raw json.RawMessage) openAPIResponse {
	t.Helper()
	var r openAPIResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		return d.response(t, d.Components.Responses[name])
	}
	return r
}

// validate checks v against the part of JSON Schema the document uses:
// $ref, type, required, properties, additionalProperties false, items,
// enum, const and pattern.
func (d *openAPIDoc) validate(raw json.RawMessage, v any, at string) error {
	var s struct {
		Ref        string                     `json:"$ref"`
		Type       json.RawMessage            `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
		Additional *bool                      `json:"additionalProperties"`
		Items      json.RawMessage            `json:"items"`
		Enum       []any                      `json:"enum"`
		Const      any                        `json:"const"`
		Pattern    string                     `json:"pattern"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("%s: schema %s: %w", at, raw, err)
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		schema, ok := d.Components.Schemas[name]
		if !ok {
			return fmt.Errorf("%s: no schema %s", at, name)
		}
		return d.validate(schema, v, at)
	}
	if len(s.Type) > 0 {
		var types []string
		if err := json.Unmarshal(s.Type, &types); err != nil {
			types = []string{strings.Trim(string(s.Type), `"`)}
		}
		if !slices.Contains(types, jsonType(v)) && !(jsonType(v) == "integer" && slices.Contains(types, "number")) {
			return fmt.Errorf("%s is %s, want %v", at, jsonType(v), types)
		}
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		return fmt.Errorf("%s is %v, not one of %v", at, v, s.Enum)
	}
	if s.Const != nil && s.Const != v {
		return fmt.Errorf("%s is %v, want %v", at, v, s.Const)
	}
	if str, ok := v.(string); ok && s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(str) {
		return fmt.Errorf("%s is %q, not matching %s", at, str, s.Pattern)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range s.Required {
			if _, ok := v[k]; !ok {
				return fmt.Errorf("%s has no %s", at, k)
			}
		}
		for k, val := range v {
			p, ok := s.Properties[k]
			if !ok {
				if s.Additional != nil && !*s.Additional {
					return fmt.Errorf("%s has %s, which the schema does not allow", at, k)
				}
				continue
			}
			if err := d.validate(p, val, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if len(s.Items) > 0 {
			for i, item := range v {
				if err := d.validate(s.Items, item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}
