package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at GET
// /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// serveOpenAPI answers GET /v1/openapi.json. It needs no caller: the
// document holds nothing of the deployment.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ Caller) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
