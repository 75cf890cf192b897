// Package s3test runs a real S3-compatible server for tests: SeaweedFS's
// weed command with its S3 gateway, on 127.0.0.1, with one identity.
//
// The weed binary is built once per machine with the go command into the
// user cache folder (keyed by SeaweedFS's version; about four minutes on two
// cores from a cold module cache): its module cannot be installed with
// go install because its go.mod has a replace directive, so a small wrapper
// module that repeats the replace builds it. $CONDITION_WEED names a weed
// binary to use instead.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/gobuild"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the SeaweedFS module version built.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// The identity the server accepts.
const (
	AccessKey = "condition-test"
	SecretKey = "condition-test-secret"
)

// Binary returns the path of a weed binary, building it into the cache
// when it is missing. Concurrent callers (several test binaries) wait for
// one build, serialised by a lock file.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv("CONDITION_WEED"); p != "" {
		return p, nil
	}
	bin, err := gobuild.Cached(ctx, gobuild.Wrapper{Dir: "seaweedfs-" + Version, Bin: "weed",
		GoMod: "module weedwrap\n\ngo 1.26\n\nrequire github.com/seaweedfs/seaweedfs " + Version +
			"\n\nreplace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0\n",
		Package: "github.com/seaweedfs/seaweedfs/weed"})
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	return bin, nil
}

// Server is a running SeaweedFS with an S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's URL, http://127.0.0.1:PORT.
	Endpoint string

	bin   string
	dir   string
	ports [4]int // master, volume, filer, s3
	cmd   *exec.Cmd
	done  chan struct{}
	log   *os.File
	mu    sync.Mutex
}

// Start starts a server in a temporary folder of t and stops it when t
// ends. It fails t when weed cannot be built or does not answer.
func Start(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := Binary(ctx)
	if err != nil {
		t.Fatalf("s3test: weed: %v", err)
	}
	s := &Server{bin: bin, dir: t.TempDir()}
	// Another process can take a chosen port between its release here and
	// weed's bind; weed then exits at once, and a new set of ports is tried.
	for try := 1; ; try++ {
		if s.ports, err = freePorts(); err != nil {
			t.Fatal(err)
		}
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.ports[3])
		err = s.start()
		if err == nil {
			break
		}
		if try == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("s3test: a port was taken before weed bound it; trying other ports: %v", firstLine(err))
		s.dir = t.TempDir() // the master's state names its ports
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// freePorts returns four distinct ports free on 127.0.0.1 whose +10000
// (weed's gRPC port for each service) are free and distinct too. Each is
// held until all are chosen, so no two are the same.
func freePorts() ([4]int, error) {
	var ports [4]int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := 0; i < len(ports); {
		if len(held) > 400 {
			return ports, errors.New("s3test: no free port pair")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports, fmt.Errorf("s3test: %w", err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		held = append(held, l2)
		ports[i] = p
		i++
	}
	return ports, nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

const s3Config = `{"identities": [{"name": "test", "credentials": [{"accessKey": %q, "secretKey": %q}],
 "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}`

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := filepath.Join(s.dir, "s3.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(s3Config, AccessKey, SecretKey)), 0o644); err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(s.ports[0]), "-volume.port="+strconv.Itoa(s.ports[1]),
		"-filer", "-filer.port="+strconv.Itoa(s.ports[2]),
		"-s3", "-s3.port="+strconv.Itoa(s.ports[3]), "-s3.config="+cfg,
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-volume.max=0", "-master.volumeSizeLimitMB=64")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("s3test: start weed: %w", err)
	}
	s.cmd, s.log, s.done = cmd, log, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			s.stopLocked()
			return fmt.Errorf("s3test: weed exited:\n%s", tail(b))
		default:
		}
		if s.answers() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
	s.stopLocked()
	return fmt.Errorf("s3test: weed's S3 gateway did not answer within 90 s:\n%s", tail(b))
}

// answers reports whether the gateway answers S3 requests (an unsigned
// request is refused with 403 once it is up).
func (s *Server) answers() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(s.Endpoint + "/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop stops the server (its whole process group); its data stays for
// Restart. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.log.Close()
	s.cmd = nil
}

// PID is the server process's id (0 when stopped), for benchmarks that
// read its CPU time.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart starts the stopped server again on its ports and data.
func (s *Server) Restart() error { return s.start() }

// Env returns the environment a client needs to reach the server with
// the test identity: AWS_ENDPOINT_URL and the keys, no profile files.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Setenv sets Env in t's environment (restored when t ends).
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// CreateBucket creates bucket with the test identity.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	return err
}
