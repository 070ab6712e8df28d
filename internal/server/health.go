package server

import (
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health returns the handler of a process's health address (AGENTRY_HEALTH_ADDR): /livez,
// /readyz and /metrics. It is served on its own listener, apart from the API's: metrics are
// for the operator's scraper, not for the public.
func Health(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", livez)
	mux.Handle("GET /readyz", readyz(o.Ready))
	if o.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry}))
	}
	return recoverer(o.Log, mux)
}

func livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok\n")
}
