// Package pgtest owns the throwaway PostgreSQL server used by tests.
//
// Each test process gets at most one cluster, started lazily by the first
// call to NewDatabase, ServerURL or Cluster, and stopped (and its files
// removed) by Main, which every package using pgtest must call from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Tests get isolation by asking NewDatabase for a fresh, empty database; the
// cluster itself is shared by all tests of the process, so tests that stop or
// restart it (see Instance) must not run in parallel with other tests.
//
// Environment:
//
//   - FLOWD_TEST_POSTGRES_URL: use this server instead of starting one. Fresh
//     databases are still created on it (and dropped) per NewDatabase call.
//   - FLOWD_TEST_PG_BINDIR: look for initdb, pg_ctl and postgres only in this
//     directory, instead of /usr/lib/postgresql/*/bin and PATH. Pointing it at
//     a missing directory exercises the "no PostgreSQL" path.
//   - CI=true: a missing PostgreSQL fails the test instead of skipping it.
//
// The cluster lives in /dev/shm/flowd-pgtest-* (or /tmp/flowd-pgtest-* when
// /dev/shm is small or missing), runs with fsync=off and listens on a free
// port of 127.0.0.1. When running as root, it runs as the "postgres" OS user,
// because PostgreSQL refuses to run as root. A watchdog process stops it and
// removes its directory should the test process end without reaching Main
// (panic, timeout, Ctrl-C).
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// Env var names; see the package documentation.
	envURL    = "FLOWD_TEST_POSTGRES_URL"
	envBinDir = "FLOWD_TEST_PG_BINDIR"

	// Clusters live under shmBase when it is a roomy tmpfs (CREATE DATABASE
	// took ~500 ms on an ext4 /tmp and ~30 ms there, even with fsync=off),
	// else under tmpBase. Both are fixed rather than os.TempDir(): as root
	// the server runs as another user, and a per-user TMPDIR may be closed
	// to it.
	shmBase    = "/dev/shm"
	shmMinFree = 1 << 30 // Docker's default 64 MiB /dev/shm is too small
	tmpBase    = "/tmp"
	dirPrefix  = "flowd-pgtest-"
	ownerFile  = "owner.pid"

	maintenanceDB = "postgres"
	superuser     = "postgres"

	// Generous, so a loaded CI machine running many packages in parallel
	// does not produce spurious failures.
	startTimeout = 120 * time.Second
	adminTimeout = 60 * time.Second
)

// Instance is the PostgreSQL server the test process uses: either a cluster
// owned by this process or an external server given by
// FLOWD_TEST_POSTGRES_URL.
type Instance struct {
	// mu serialises Start, Stop and Restart.
	mu sync.Mutex

	external *url.URL // set when the server is external

	binDir  string
	baseDir string // temp dir: owns data dir, log and unix socket
	dataDir string
	logFile string
	port    int
	cred    *syscall.Credential // non-nil when running as root
}

// External reports whether the server is an external one
// (FLOWD_TEST_POSTGRES_URL), which pgtest cannot stop or restart.
func (in *Instance) External() bool { return in.external != nil }

// URL returns a postgres:// URL for database dbname on the server.
func (in *Instance) URL(dbname string) string {
	if in.external != nil {
		u := *in.external
		u.Path = "/" + dbname
		u.RawPath = ""
		return u.String()
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(in.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Restart restarts the server (fast shutdown: open sessions are
// terminated) and returns once it accepts connections again.
func (in *Instance) Restart(ctx context.Context) error {
	if in.external != nil {
		return errExternal("Restart")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	// -l again: without it the new postmaster would write to pg_ctl's
	// stdout, our pipe, and keep it open forever.
	if err := in.pgCtl(ctx, "restart", "-m", "fast", "-l", in.logFile, "-o", in.serverOptions()); err != nil {
		return fmt.Errorf("pgtest: restart: %w%s", err, in.logTail())
	}
	return in.waitReady(ctx)
}

// Stop stops the server (fast shutdown). Start brings it back on the same
// port, so URLs handed out before stay valid.
func (in *Instance) Stop(ctx context.Context) error {
	if in.external != nil {
		return errExternal("Stop")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.pgCtl(ctx, "stop", "-m", "fast"); err != nil {
		return fmt.Errorf("pgtest: stop: %w%s", err, in.logTail())
	}
	return nil
}

// Start starts a server stopped by Stop and returns once it accepts
// connections.
func (in *Instance) Start(ctx context.Context) error {
	if in.external != nil {
		return errExternal("Start")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.start(ctx); err != nil {
		return err
	}
	return in.waitReady(ctx)
}

func errExternal(op string) error {
	return fmt.Errorf("pgtest: %s is not supported on an external server (%s is set)", op, envURL)
}

// Process-wide state: one server per test process.
var (
	setupOnce sync.Once
	current   *Instance
	setupErr  error
	// noBinaries holds the skip message when PostgreSQL is not installed.
	noBinaries string

	dbCounter atomic.Int64
	// dbPrefix makes database names unique across processes, including
	// processes on other machines (same pid in another container) sharing
	// an external server.
	dbPrefix = fmt.Sprintf("flowd_test_%d_%s_", os.Getpid(), randomHex(3))
)

// Main runs the tests and then stops the cluster, if one was started, and
// removes its files. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// NewDatabase creates a fresh, empty database and returns its URL. The
// database is dropped (forcibly, closing leftover sessions) when tb's test
// ends. It skips tb when PostgreSQL is not installed (fails under CI=true).
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	in := instance(tb)
	name := dbPrefix + strconv.FormatInt(dbCounter.Add(1), 10)
	ident := pgx.Identifier{name}.Sanitize()

	// template0 is pristine even on an external server whose template1 was
	// modified, and nobody can be connected to it (which would make CREATE
	// DATABASE fail).
	if err := in.admin(context.Background(), "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		// The test's own context is already cancelled here.
		if err := in.admin(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return in.URL(name)
}

// ServerURL returns the URL of the server's maintenance database. With
// FLOWD_TEST_POSTGRES_URL set, that URL is returned as given.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	return instance(tb).adminURL()
}

// Cluster returns the server, for tests that inject faults (restart, stop).
func Cluster(tb testing.TB) *Instance {
	tb.Helper()
	return instance(tb)
}

// instance starts the server on first use and applies the skip/fail rules.
func instance(tb testing.TB) *Instance {
	tb.Helper()
	setupOnce.Do(setup)
	switch {
	case noBinaries != "" && inCI():
		tb.Fatalf("pgtest: %s (CI=true, so this is a failure, not a skip)", noBinaries)
	case noBinaries != "":
		tb.Skip(noBinaries)
	case setupErr != nil:
		tb.Fatalf("%v", setupErr)
	}
	return current
}

func inCI() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

func setup() {
	if raw := os.Getenv(envURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			setupErr = fmt.Errorf("pgtest: %s must be a postgres:// URL, got %q", envURL, raw)
			return
		}
		current = &Instance{external: u}
		return
	}

	binDir, err := findBinDir()
	if err != nil {
		noBinaries = err.Error()
		return
	}
	removeStale()
	current, setupErr = startCluster(binDir)
}

var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// findBinDir returns a directory holding all server binaries; they must sit
// together because pg_ctl runs the postgres next to itself.
func findBinDir() (string, error) {
	if dir := os.Getenv(envBinDir); dir != "" {
		if hasServerBinaries(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in %s=%s; "+
			"install the postgresql package or set %s", envBinDir, dir, envURL)
	}

	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(dirs[j])), filepath.Base(filepath.Dir(dirs[i])))
	})
	for _, dir := range dirs {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and PATH); " +
		"install the postgresql package or set " + envURL)
}

func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionLess compares dotted version numbers such as "9.6" and "15".
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

func startCluster(binDir string) (*Instance, error) {
	in := &Instance{binDir: binDir}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		in.cred = cred
	}

	dir, err := os.MkdirTemp(clusterParent(), dirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	in.baseDir = dir
	in.dataDir = filepath.Join(dir, "data")
	in.logFile = filepath.Join(dir, "server.log")
	fail := func(err error) (*Instance, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Lets removeStale tell our directory from a dead process's.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(fmt.Errorf("pgtest: %w", err))
	}
	if in.cred != nil {
		if err := os.Chown(dir, int(in.cred.Uid), int(in.cred.Gid)); err != nil {
			return fail(fmt.Errorf("pgtest: chown %s: %w", dir, err))
		}
	}
	if err := in.startWatchdog(); err != nil {
		return fail(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	// --locale=C: the machine's locale may not be installed, and byte-order
	// collation keeps test results independent of it.
	if out, err := in.command(ctx, "initdb", "-D", in.dataDir, "-A", "trust", "-U", superuser,
		"--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %w\n%s", err, bytes.TrimSpace(out)))
	}

	// The free port can be taken by someone else between our probe and the
	// server's bind (other test processes do the same), so retry once.
	for attempt := 0; ; attempt++ {
		if in.port, err = freePort(); err != nil {
			return fail(fmt.Errorf("pgtest: find a free port: %w", err))
		}
		err = in.start(ctx)
		if err == nil {
			break
		}
		if attempt > 0 || !strings.Contains(in.logTail(), "already in use") {
			return fail(err)
		}
	}
	if err := in.waitReady(ctx); err != nil {
		_ = in.pgCtl(context.Background(), "stop", "-m", "immediate")
		return fail(err)
	}
	return in, nil
}

func clusterParent() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmBase, &st); err == nil && uint64(st.Bavail)*uint64(st.Bsize) >= shmMinFree {
		return shmBase
	}
	return tmpBase
}

// watchdogScript waits for the test process ($1) to end, then stops its
// cluster and removes its directory. Main normally did both already, but a
// test binary that panics, times out or is interrupted never reaches Main,
// and its postmaster, being daemonised, would run on forever. kill -0 fails
// with EPERM when the watchdog runs as postgres and the test as root, hence
// also the /proc check.
const watchdogScript = `
while kill -0 "$1" 2>/dev/null || [ -d "/proc/$1" ]; do sleep 1; done
if [ -f "$3/postmaster.pid" ]; then "$4/pg_ctl" stop -m immediate -D "$3" >/dev/null 2>&1; fi
rm -rf "$2"
`

// startWatchdog starts watchdogScript, as the server's user so that it can
// only ever affect postgres processes, in its own session so that Ctrl-C
// on the test does not take it down too, and with no stdio so that go test
// does not wait for it.
func (in *Instance) startWatchdog() error {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog",
		strconv.Itoa(os.Getpid()), in.baseDir, in.dataDir, in.binDir)
	cmd.Dir = in.baseDir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: in.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start watchdog: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it, should it end before us
	return nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, but PostgreSQL refuses to run as root and "+
			"there is no \"postgres\" OS user to run it as (%v); create one (the postgresql package does) "+
			"or run the tests as a normal user", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: bad uid/gid %q/%q for user postgres", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serverOptions are the postgres options; test-only durability settings
// (fsync=off and friends) are fine for tests, never for benchmarks.
func (in *Instance) serverOptions() string {
	return strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(in.port),
		"-c unix_socket_directories=" + in.baseDir,
		"-c fsync=off",
		"-c synchronous_commit=off",
		"-c full_page_writes=off",
		"-c max_connections=300",
		// A test that dies mid-transaction must not hold locks forever.
		"-c idle_in_transaction_session_timeout=60s",
		// Commit times of rows (pg_xact_commit_timestamp): a test can
		// replay what several transactions wrote in the order they
		// committed (the definition concurrency invariant check).
		"-c track_commit_timestamp=on",
	}, " ")
}

func (in *Instance) start(ctx context.Context) error {
	if err := in.pgCtl(ctx, "start", "-l", in.logFile, "-o", in.serverOptions()); err != nil {
		return fmt.Errorf("pgtest: start PostgreSQL (%s) on port %d: %w%s", in.binDir, in.port, err, in.logTail())
	}
	return nil
}

// pgCtl runs a pg_ctl subcommand against our data dir, waiting for it to
// complete.
func (in *Instance) pgCtl(ctx context.Context, subcmd string, args ...string) error {
	timeout := strconv.Itoa(int(startTimeout / time.Second))
	all := append([]string{subcmd, "-D", in.dataDir, "-w", "-t", timeout}, args...)
	out, err := in.command(ctx, "pg_ctl", all...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s", subcmd, err, bytes.TrimSpace(out))
	}
	return nil
}

func (in *Instance) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(in.binDir, name), args...)
	// The postgres user may not be able to enter the test's working dir.
	cmd.Dir = in.baseDir
	cmd.Env = serverEnv()
	// Safety net: should a daemonised postmaster ever inherit our output
	// pipe, return instead of waiting for it to exit.
	cmd.WaitDelay = 10 * time.Second
	if in.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	}
	return cmd
}

// serverEnv drops PG* variables (PGDATA, PGPORT... would redirect the tools)
// and locale settings that might name a locale that is not installed.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "LC_") || name == "LANG" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// logTail returns the end of the server log, for error messages.
func (in *Instance) logTail() string {
	if in.logFile == "" {
		return ""
	}
	b, err := os.ReadFile(in.logFile)
	if err != nil || len(b) == 0 {
		return ""
	}
	const maxTail = 4000
	if len(b) > maxTail {
		b = b[len(b)-maxTail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "\nserver log (" + in.logFile + ") ends with:\n" + string(bytes.TrimSpace(b))
}

// waitReady waits until the server accepts queries; pg_ctl -w mostly
// guarantees it, this also covers a slow end of recovery.
func (in *Instance) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, in.adminURL())
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(context.WithoutCancel(ctx))
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: server not ready: %w%s", lastErr, in.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (in *Instance) adminURL() string {
	if in.external != nil {
		return in.external.String()
	}
	return in.URL(maintenanceDB)
}

// admin runs one statement on the maintenance database. A connection per
// call keeps it safe for parallel tests; local connections are cheap.
func (in *Instance) admin(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, in.adminURL())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// shutdown stops the cluster owned by this process, if any, and removes its
// files.
func shutdown() error {
	in := current
	if in == nil || in.external != nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// A test may have left the server stopped; pg_ctl then fails, which is
	// fine as long as nothing is running.
	stopErr := in.pgCtl(ctx, "stop", "-m", "immediate")
	if stopErr != nil && isRunning(in.dataDir) {
		return fmt.Errorf("pgtest: stop cluster in %s: %w", in.baseDir, stopErr)
	}
	if err := os.RemoveAll(in.baseDir); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// removeStale removes clusters left in /dev/shm or /tmp by test processes
// that died without running Main (killed, timed out). Best effort: a
// directory is removed only when both its owning test process and its
// postmaster are gone, so nothing alive is touched.
func removeStale() {
	var dirs []string
	for _, base := range []string{shmBase, tmpBase} {
		found, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
		dirs = append(dirs, found...)
	}
	for _, dir := range dirs {
		if owner, ok := readPID(filepath.Join(dir, ownerFile)); ok {
			if processAlive(owner) {
				continue
			}
		} else if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Minute {
			// No owner file: maybe another process has only just created it.
			continue
		}
		if isRunning(filepath.Join(dir, "data")) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// isRunning reports whether the postmaster.pid in dataDir names a live
// process. A pid file that cannot be read counts as running: we cannot tell.
func isRunning(dataDir string) bool {
	path := filepath.Join(dataDir, "postmaster.pid")
	pid, ok := readPID(path)
	if !ok {
		_, err := os.Stat(path)
		return !errors.Is(err, os.ErrNotExist)
	}
	return processAlive(pid)
}

// readPID reads the pid on the first line of a file.
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	// EPERM: it exists but belongs to someone else.
	return err == nil || errors.Is(err, syscall.EPERM)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
