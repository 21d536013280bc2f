// Package redistest starts a real redis-server for tests: on a free
// 127.0.0.1 port, in a temporary directory, stopped when the test ends.
//
// The server binary is found as $REDIS_SERVER, then redis-server on $PATH,
// then /usr/bin/redis-server (Debian's redis-server package; `make test`
// installs it when it is missing). Tests that need it fail, not skip, when it
// cannot be found: a skipped fault test is a hidden hole.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	// Addr is host:port of the server, 127.0.0.1 and a free port.
	Addr string
	// Dir is the server's working directory (its append-only file, if any).
	Dir string

	bin  string
	tb   testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	args []string
}

// Option configures a server.
type Option func(*Server)

// WithArgs adds redis-server configuration arguments, e.g.
// WithArgs("--requirepass", "secret").
func WithArgs(args ...string) Option {
	return func(s *Server) { s.args = append(s.args, args...) }
}

// Binary returns the redis-server binary to use, or an error saying how to
// install it.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("redis-server not found: install Debian's redis-server package (make test does it when run as root) or set REDIS_SERVER")
}

// Start starts a server for tb and registers its shutdown with tb.Cleanup.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{bin: bin, tb: tb, Dir: tb.TempDir()}
	for _, o := range opts {
		o(s)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("redistest: free port: %v", err)
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// URL returns a redis:// URL for the server (no credentials).
func (s *Server) URL() string { return "redis://" + s.Addr }

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	args := append([]string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := ping(s.Addr); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redistest: redis-server exited at start; log: %s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redistest: redis-server on %s not ready after 10s; log: %s", s.Addr, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Kill ends the server with SIGKILL and waits for it (a crash: nothing is
// saved).
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same address after Kill (its data
// is gone, as after a crash without persistence).
func (s *Server) Restart() {
	s.tb.Helper()
	var err error
	for range 50 { // the port may take a moment to be free again
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatal(err)
}

// Stop ends the server; it is called by the test's cleanup.
func (s *Server) Stop() { s.kill() }

// Do sends one command with a fresh connection and returns the reply's first
// line, for tests that need to poke the server without a client library.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.Addr, args...)
}

func ping(addr string) error {
	r, err := do(addr, "PING")
	if err != nil {
		return err
	}
	// -NOAUTH: a server with a password is up too.
	if r != "+PONG" && !strings.HasPrefix(r, "-NOAUTH") {
		return fmt.Errorf("PING: %s", r)
	}
	return nil
}

func do(addr string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
