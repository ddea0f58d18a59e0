package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Postgres is a real PostgreSQL server for the tests that need one: Debian's
// postgresql package, started on first use in a temporary directory and
// stopped when the test binary's tests are done (Main), one server per test
// binary; each test gets a database of its own. Root may not run the
// server, so under root it runs as the unprivileged user nobody. It
// listens on a Unix socket in its directory only, so test binaries running
// at once never meet on a port.
//
// Without the package a test skips loudly, and fails under CI=true.
func Postgres(t testing.TB) string {
	t.Helper()
	Long(t, "starts a PostgreSQL server")
	pg.Lock()
	defer pg.Unlock()
	if pg.srv == nil && pg.err == nil {
		bin, err := postgresBin()
		if err != nil {
			Missing(t, "PostgreSQL", err.Error()+" (apt-get install postgresql)")
		}
		pg.srv, pg.err = startPostgres(bin)
	}
	if pg.err != nil {
		t.Fatalf("start PostgreSQL: %v", pg.err)
	}
	name := "t_" + strings.ToLower(randomHex(6))
	if out, err := pg.srv.psql("postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create the test's database: %v\n%s", err, out)
	}
	return pg.srv.url(name)
}

// Main runs a package's tests and stops the PostgreSQL server they started,
// if any: the TestMain of a package whose tests call Postgres.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	pg.Lock()
	defer pg.Unlock()
	if pg.srv != nil {
		pg.srv.stop()
		pg.srv = nil
	}
	return code
}

// pg is the test binary's server, started by the first test that asks.
var pg struct {
	sync.Mutex
	srv *pgServer
	err error
}

type pgServer struct {
	bin, dir string
	cmd      *exec.Cmd
	done     chan error
	cred     *syscall.Credential
}

// postgresBin is the newest installed server's bin directory.
func postgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres")
	}
	slices.SortFunc(found, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	return filepath.Dir(found[len(found)-1]), nil
}

func pgVersion(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startPostgres makes a cluster in a new temporary directory and starts
// its server there.
func startPostgres(bin string) (*pgServer, error) {
	removeStalePostgres()
	dir, err := os.MkdirTemp("", "sandbox-bot-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir, done: make(chan error, 1)}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	if os.Getuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("root may not run PostgreSQL, and there is no user nobody to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := s.command("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-sync", "--locale=C", "--encoding=UTF8", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := s.start(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *pgServer) data() string { return filepath.Join(s.dir, "data") }

// command is one of the server's programs, run as the server's user.
func (s *pgServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + s.dir, "PGHOST=" + s.dir, "PGUSER=postgres"}
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// start runs the server, on a locked thread whose end (the test binary's
// end, however it ends) stops it with the parent-death signal.
func (s *pgServer) start() error {
	logf, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return err
	}
	// Durability is the machine's business, not the tests': no fsync.
	s.cmd = s.command("postgres", "-D", s.data(), "-k", s.dir, "-c", "listen_addresses=", "-c", "fsync=off",
		"-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if s.cmd.SysProcAttr == nil {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	s.cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the server
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.done <- s.cmd.Wait()
		logf.Close()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := s.command("pg_isready", "-q").CombinedOutput()
		if err == nil {
			return nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("postgres exited (%v):\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready within a minute: %s", out)
		}
	}
}

// psql runs one statement in database db.
func (s *pgServer) psql(db, sql string) ([]byte, error) {
	return s.command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql).CombinedOutput()
}

// url is the address of database db (pgx's form: the socket directory as
// the host).
func (s *pgServer) url(db string) string {
	return "postgres:///" + db + "?host=" + s.dir + "&user=postgres&sslmode=disable"
}

// stop shuts the server down (fast: sessions are ended) and removes its
// directory.
func (s *pgServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

// removeStalePostgres removes the directories of servers whose test
// binary is gone (killed before Main could stop them; the server itself
// stopped on its parent's death).
func removeStalePostgres() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sandbox-bot-pg-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			if _, err := os.Stat(filepath.Join(d, "data", "postmaster.pid")); err == nil {
				continue // its server has not stopped yet
			}
			os.RemoveAll(d)
		}
	}
}
