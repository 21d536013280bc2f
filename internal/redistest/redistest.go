// Package redistest starts a real redis-server for tests: on a free
// 127.0.0.1 port, in a temporary directory, stopped when the test ends.
// StartCluster starts three of them as a Redis Cluster of three masters
// (no replicas), its 16384 slots split evenly, and Each runs a test
// against one server and against a cluster, so that every fleet test
// that can runs on both.
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
	"io"
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

	bin      string
	password string // from --requirepass: the setup commands authenticate
	tb       testing.TB
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	args     []string
}

// binary returns the redis-server binary to use, or an error saying how to
// install it.
func binary() (string, error) {
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
// args are added to redis-server's configuration arguments, e.g.
// Start(tb, "--requirepass", "secret"); the server authenticates its own
// setup commands with a --requirepass it is given.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return startWith(tb, func() ([]string, error) { return args, nil })
}

// startAttempts is how many times startWith picks new ports for a server
// whose port another process took between freePort and redis-server's
// bind (an outgoing connection's ephemeral port, another test's server).
const startAttempts = 5

// startWith starts a server as Start does, with the arguments args gives
// (called again, for fresh ports of its own, at each attempt), on a free
// port; it tries again on new ports when redis-server cannot bind.
func startWith(tb testing.TB, args func() ([]string, error)) *Server {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{bin: bin, tb: tb, Dir: tb.TempDir()}
	for attempt := 1; ; attempt++ {
		err := s.startOnFreePort(args)
		if err == nil {
			break
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(s.Stop)
	return s
}

// errPortTaken: redis-server could not bind one of its ports.
var errPortTaken = errors.New("a port was taken before redis-server could bind it")

// startOnFreePort starts s on a free port with the arguments args gives.
func (s *Server) startOnFreePort(args func() ([]string, error)) error {
	a, err := args()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("redistest: free port: %w", err)
	}
	s.args = append([]string(nil), a...)
	// A failed attempt's log and cluster configuration are not this one's.
	_ = os.Remove(filepath.Join(s.Dir, "redis.log"))
	_ = os.Remove(filepath.Join(s.Dir, "nodes.conf"))
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for i, a := range s.args {
		if a == "--requirepass" && i+1 < len(s.args) {
			s.password = s.args[i+1]
		}
	}
	err = s.start()
	if err != nil && strings.Contains(s.log(), "Address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
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
			if s.ours(cmd.Process.Pid) {
				return nil
			}
			// Another server holds the port: this one cannot bind it.
			s.kill()
			return fmt.Errorf("redistest: %s answers, but not as the redis-server started on it: %w", s.Addr, errPortTaken)
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
	return do(s.Addr, "", args...)
}

// ours reports whether the server answering on s.Addr is the process pid
// (INFO's process_id), not another test's server on a port taken between
// freePort and this one's bind.
func (s *Server) ours(pid int) bool {
	info, err := do(s.Addr, s.password, "INFO", "server")
	return err == nil && strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n")
}

func ping(addr string) error {
	r, err := do(addr, "", "PING")
	if err != nil {
		return err
	}
	// -NOAUTH: a server with a password is up too.
	if r != "+PONG" && !strings.HasPrefix(r, "-NOAUTH") {
		return fmt.Errorf("PING: %s", r)
	}
	return nil
}

// do sends one command (after AUTH when password is set) and returns the
// reply's first line; a bulk string reply is returned whole.
func do(addr, password string, args ...string) (string, error) {
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
	cmds := [][]string{args}
	if password != "" {
		cmds = [][]string{{"AUTH", password}, args}
	}
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	var reply string
	for range cmds {
		if reply, err = readReply(r); err != nil {
			return "", err
		}
		if strings.HasPrefix(reply, "-") {
			break // AUTH failed: that is the answer
		}
	}
	return reply, nil
}

// readReply reads one reply: a status, error or integer line as it is
// ("+OK", "-ERR …", ":1"), a bulk string's content, "(nil)" for a null.
// Arrays are not needed by the setup commands and are refused.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		if strings.HasPrefix(line, "*") {
			return "", fmt.Errorf("redistest: array reply not supported")
		}
		return line, nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return "", fmt.Errorf("redistest: bad bulk length %q", line)
	}
	if n < 0 {
		return "(nil)", nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// freePort returns a port that was free a moment ago (a variable: a test
// hands out a taken one).
var freePort = pickFreePort

func pickFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
