package region

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"

	"go.uber.org/zap"
)

//go:embed templates/status.html
var pageFS embed.FS

// statusPage renders a Status as HTML (escaped by html/template).
var statusPage = template.Must(template.ParseFS(pageFS, "templates/status.html"))

// serveStatus answers /status.json.
func (s *Server) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.Status())
}

// servePage answers / with the status page.
func (s *Server) servePage(w http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := statusPage.Execute(&b, s.Status()); err != nil {
		s.log.Warn("status page not rendered", zap.Error(err))
		http.Error(w, "status page not rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}
