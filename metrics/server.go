package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/engine"
)

// Handler serves the snapshot's series plus the Go runtime and process
// series on a registry of its own, so two engines in one process (tests)
// never collide.
func Handler(snapshot func() engine.Snapshot, cfg Config) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(snapshot, cfg), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Mux serves /metrics, /healthz (liveness: the process answers) and
// /readyz (readiness, see Readiness).
func Mux(snapshot func() engine.Snapshot, cfg Config) *http.ServeMux {
	health := cfg.Health
	if health == nil {
		health = func() engine.Health { return healthOf(snapshot()) }
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(snapshot, cfg))
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/readyz", readyz(health))
	return mux
}

// Server serves Mux on its own listener until Close.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup
	errc chan error
}

// shutdownTimeout bounds how long Close waits for scrapes in progress.
const shutdownTimeout = 5 * time.Second

// Start listens on addr (host:port; port 0 picks a free one) and serves
// /metrics, /healthz and /readyz from snapshot.
func Start(addr string, snapshot func() engine.Snapshot, cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: Mux(snapshot, cfg), ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		errc: make(chan error, 1),
	}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("metrics server %s: %w", ln.Addr(), err)
		}
	})
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, letting scrapes in progress finish, and returns
// the error that ended serving early, if any.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.wg.Wait()
	select {
	case serr := <-s.errc:
		return serr
	default:
	}
	if err != nil {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	return nil
}
