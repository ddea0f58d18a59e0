package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// runReceipts is `sandbox-bot receipts copy --from <sqlite path> --to
// <postgres url>`: what a bot on one machine kept (receipts and
// transcripts, in SQLite) goes to the PostgreSQL database that replicas
// share. What the target holds already stays as it is, so running it
// twice, or while a bot writes to the target, copies nothing twice.
func runReceipts(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "copy" {
		fmt.Fprintln(stderr, "usage: sandbox-bot receipts copy --from <SANDBOX_DATA_DIR or its receipts.db> --to <postgres://…>")
		return 2
	}
	fs := flag.NewFlagSet("sandbox-bot receipts copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the SQLite database to copy: receipts.db, its directory, or the bot's SANDBOX_DATA_DIR")
	to := fs.String("to", "", "the PostgreSQL database to copy into (default: $SANDBOX_DATABASE_URL)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *to == "" {
		*to, _ = getenv("SANDBOX_DATABASE_URL")
	}
	if err := copyReceipts(ctx, *from, *to, stdout); err != nil {
		fmt.Fprintln(stderr, "sandbox-bot receipts copy: "+err.Error())
		return 1
	}
	return 0
}

func copyReceipts(ctx context.Context, from, to string, stdout io.Writer) error {
	if to == "" {
		return errors.New("--to: required (the PostgreSQL database, postgres://user:password@host:5432/database)")
	}
	dir, err := sqliteDir(from)
	if err != nil {
		return err
	}
	src, err := receipts.OpenSQLite(dir)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := receipts.OpenPostgres(ctx, to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()
	copied, err := receipts.Copy(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("from %s to %s: %w (what was copied stays; run it again to go on)", src.Where(), dst.Where(), err)
	}
	fmt.Fprintf(stdout, "from %s to %s: %s\n", src.Where(), dst.Where(), copied)
	return nil
}

// sqliteDir finds the directory of the receipts database from what the
// operator named, never creating one where there is none.
func sqliteDir(from string) (string, error) {
	if from == "" {
		return "", errors.New("--from: required (the bot's SANDBOX_DATA_DIR, or its receipts/receipts.db)")
	}
	for _, candidate := range []string{from, filepath.Join(from, receipts.FileName), filepath.Join(from, "receipts", receipts.FileName)} {
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() {
			if filepath.Base(candidate) != receipts.FileName {
				return "", fmt.Errorf("--from: %s is not a receipts database (%s)", from, receipts.FileName)
			}
			return filepath.Dir(candidate), nil
		}
	}
	return "", fmt.Errorf("--from: no receipts database at %s (looked for %s in it, and in its receipts/)", from, receipts.FileName)
}
