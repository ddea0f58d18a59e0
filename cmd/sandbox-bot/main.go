// Command sandbox-bot is the GitHub App server: it receives webhooks,
// dispatches sandbox runs on the configured backend (docker, nomad, or plain
// processes) and reports their results on GitHub.
//
// Configuration comes from the environment (GITHUB_*, NOMAD_*, SANDBOX_*),
// an optional env file named by SANDBOX_BOT_ENV_FILE and an optional YAML file
// named by SANDBOX_CONFIG; see docs/configuration.md. `sandbox-bot setup` registers
// the GitHub App from app.yml and writes that env file (setup.go);
// `sandbox-bot receipts copy` moves what one machine kept to the database
// replicas share (receipts.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app"
)

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) > 1 && os.Args[1] == "setup" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return runSetup(ctx, os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr)
	}
	if len(os.Args) > 1 && os.Args[1] == "receipts" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return runReceipts(ctx, os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr)
	}
	cfg, err := app.LoadConfig(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-bot: "+err.Error())
		return 2
	}
	// Sub-second timestamps: stage timings of a run are read from the log.
	zerolog.TimeFieldFormat = time.RFC3339Nano
	logger := app.NewLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	backend, closeBackend, err := app.NewBackend(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-bot: "+err.Error())
		return 2
	}
	defer closeBackend()
	srv, err := app.NewServer(cfg, backend, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-bot: "+err.Error())
		return 2
	}
	if err := srv.Start(ctx); err != nil {
		logger.Error().Err(err).Msg("reconcile runs at start; continuing, the next restart tries again")
	}
	httpSrv := app.NewHTTPServer(cfg, cfg.Listen, srv.Handler())
	errs := make(chan error, 2)
	go func() { errs <- listenErr("SANDBOX_LISTEN", cfg.Listen, httpSrv.ListenAndServe()) }()
	// The dashboard and metrics never share the webhook listener.
	var adminSrv *http.Server
	if cfg.Ops.AdminListen != "off" {
		adminSrv = app.NewHTTPServer(cfg, cfg.Ops.AdminListen, srv.AdminHandler())
		go func() { errs <- listenErr("SANDBOX_ADMIN_LISTEN", cfg.Ops.AdminListen, adminSrv.ListenAndServe()) }()
	}
	logger.Info().Str("listen", cfg.Listen).Str("admin_listen", cfg.Ops.AdminListen).Str("backend", backend.Name()).Str("image", cfg.Image).Msg("sandbox-bot started")

	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "sandbox-bot: "+err.Error())
		return 1
	case <-ctx.Done():
	}
	logger.Info().Msg("shutting down: draining the webhook queue")
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn().Err(err).Msg("HTTP shutdown")
	}
	if adminSrv != nil {
		if err := adminSrv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn().Err(err).Msg("admin HTTP shutdown")
		}
	}
	if err := srv.Drain(shutdown); err != nil {
		logger.Warn().Err(err).Msg("queue not drained")
	}
	// Runs go on in the backend; the next start reconciles them.
	srv.Stop()
	logger.Info().Msg("stopped")
	return 0
}

// listenErr names the setting whose listener failed.
func listenErr(setting, addr string, err error) error {
	return fmt.Errorf("%s %s: %w", setting, addr, err)
}
