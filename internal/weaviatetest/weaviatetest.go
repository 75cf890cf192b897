// Package weaviatetest runs a real Weaviate vector database for tests: one
// node, or a cluster of several nodes joined on 127.0.0.1, each node a
// weaviate-server process with its own data folder, log and free ports,
// stopped when the test ends.
//
// The weaviate-server binary of Weaviate Version (v1.35.2) is built once
// per machine with the go command into the user cache folder,
// <UserCacheDir>/condition/test/weaviate-v1.35.2/weaviate-server, through a
// small wrapper module that requires Weaviate's module (package gobuild):
// 4 min 34 s on two cores with the module cache partly warm, more with
// every module to download; concurrent test binaries wait for one build.
// $CONDITION_WEAVIATE names a weaviate-server binary to use instead.
//
// Nodes run without modules (no vectorizer: clients send their vectors),
// without telemetry and, unless Options.APIKey is set, with anonymous
// access. Raft keeps its own default timeouts (Weaviate otherwise
// multiplies them by 5), so a node starts and a cluster elects a new leader
// in a few seconds. Tests that start Weaviate are skipped with -short.
package weaviatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/gobuild"
)

// Version is the Weaviate module version built.
const Version = "v1.35.2"

// User is the name the API key of Options.APIKey authenticates as.
const User = "test-user"

// How long a node (StartTimeout) or a whole cluster (ClusterStartTimeout)
// may take to answer before Start or StartCluster fails the test.
const (
	StartTimeout        = 120 * time.Second
	ClusterStartTimeout = 180 * time.Second
)

// Binary returns the path of a weaviate-server binary, building it into
// the cache when it is missing. Concurrent callers (several test binaries)
// wait for one build, serialised by a lock file.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv("CONDITION_WEAVIATE"); p != "" {
		return p, nil
	}
	bin, err := build(ctx)
	if err != nil {
		return "", fmt.Errorf("weaviatetest: build weaviate-server %s: %w", Version, err)
	}
	return bin, nil
}

func build(ctx context.Context) (string, error) {
	return gobuild.Cached(ctx, gobuild.Wrapper{Dir: "weaviate-" + Version, Bin: "weaviate-server",
		GoMod:   "module weaviatewrap\n\ngo 1.26\n\nrequire github.com/weaviate/weaviate " + Version + "\n",
		Package: "github.com/weaviate/weaviate/cmd/weaviate-server"})
}

// Options configure a node started by StartWith.
type Options struct {
	// APIKey, when set, turns anonymous access off: the node accepts only
	// requests with the header "Authorization: Bearer APIKEY", as User, who
	// is an admin (may read and write everything).
	APIKey string
}

// Node is one running (or stopped) weaviate-server process.
type Node struct {
	// URL is the node's REST endpoint, http://127.0.0.1:PORT.
	URL string
	// Name is the node's cluster host name, node1, node2, ...
	Name string

	bin     string
	dir     string // data and log live here
	apiKey  string
	ports   ports
	env     []string // fixed part of the environment
	cluster *Cluster // nil for a lone node
	nodes   int      // nodes expected in the Raft cluster
	raft    string   // RAFT_JOIN

	mu  sync.Mutex
	run *run // nil when stopped
}

// run is one process of a node.
type run struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when cmd has ended, err then set
	err  error
}

// ports are a node's ports. Weaviate takes the data port of
// another node from its gossip metadata, falling back to gossip+1, and on
// one host (CLUSTER_IN_LOCALHOST) reaches another node's internal Raft RPC
// at its Raft port + 1, so those pairs are adjacent.
type ports struct {
	http, gossip, data, raft, rpc, grpc int
}

// Start starts one node in a temporary folder of t and stops it when t
// ends. It fails t when weaviate-server cannot be built or the node does
// not answer within StartTimeout.
func Start(t testing.TB) *Node {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Node {
	t.Helper()
	bin := binary(t)
	var pp portPicker
	p, err := pp.ports()
	pp.release()
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(bin, t.TempDir(), 1, p, o.APIKey)
	n.nodes, n.raft = 1, fmt.Sprintf("%s:%d", n.Name, p.raft)
	t.Cleanup(n.Stop)
	logOnFailure(t, n)
	if err := n.launch(nil); err != nil {
		t.Fatal(err)
	}
	if err := n.waitReady(time.Now().Add(StartTimeout), StartTimeout); err != nil {
		n.Kill()
		t.Fatal(err)
	}
	return n
}

func binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("weaviatetest: runs a Weaviate server; skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bin, err := Binary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// logOnFailure logs the tail of n's log when t has failed, before n is
// stopped (it is called after the cleanup that stops n is registered).
func logOnFailure(t testing.TB, n *Node) {
	t.Cleanup(func() {
		if b, _ := os.ReadFile(n.logPath()); t.Failed() && len(b) > 0 {
			t.Logf("weaviatetest: %s's log ends:\n%s", n.Name, tail(b))
		}
	})
}

func newNode(bin, dir string, i int, p ports, apiKey string) *Node {
	n := &Node{
		URL:    "http://127.0.0.1:" + strconv.Itoa(p.http),
		Name:   "node" + strconv.Itoa(i),
		bin:    bin,
		dir:    dir,
		apiKey: apiKey,
		ports:  p,
	}
	n.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"TMPDIR=" + os.TempDir(),
		"PERSISTENCE_DATA_PATH=" + filepath.Join(dir, "data"),
		"DEFAULT_VECTORIZER_MODULE=none",
		"ENABLE_MODULES=",
		"DISABLE_TELEMETRY=true",
		"GO_PROFILING_DISABLE=true", // else every node listens on :6060
		// Raft's timeouts are 5 times its defaults unless told; on loopback
		// the defaults do, and a lone node elects itself in seconds, not ten.
		"RAFT_TIMEOUTS_MULTIPLIER=1",
		"CLUSTER_HOSTNAME=" + n.Name,
		"CLUSTER_IN_LOCALHOST=true",
		"CLUSTER_ADVERTISE_ADDR=127.0.0.1",
		"CLUSTER_BIND_ADDR=127.0.0.1",
		"CLUSTER_GOSSIP_BIND_PORT=" + strconv.Itoa(p.gossip),
		"CLUSTER_DATA_BIND_PORT=" + strconv.Itoa(p.data),
		"RAFT_PORT=" + strconv.Itoa(p.raft),
		"RAFT_INTERNAL_RPC_PORT=" + strconv.Itoa(p.rpc),
		"GRPC_PORT=" + strconv.Itoa(p.grpc),
	}
	if apiKey == "" {
		n.env = append(n.env, "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true")
	} else {
		n.env = append(n.env,
			"AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=false",
			"AUTHENTICATION_APIKEY_ENABLED=true",
			"AUTHENTICATION_APIKEY_ALLOWED_KEYS="+apiKey,
			"AUTHENTICATION_APIKEY_USERS="+User,
			"AUTHORIZATION_ADMINLIST_ENABLED=true",
			"AUTHORIZATION_ADMINLIST_USERS="+User)
	}
	return n
}

func (n *Node) logPath() string { return filepath.Join(n.dir, "weaviate.log") }

// launch starts the process, joining the gossip of the nodes at join.
func (n *Node) launch(join []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run != nil {
		return fmt.Errorf("weaviatetest: %s is running", n.Name)
	}
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("weaviatetest: %w", err)
	}
	cmd := exec.Command(n.bin, "--host", "127.0.0.1", "--port", strconv.Itoa(n.ports.http), "--scheme", "http")
	cmd.Env = append(slices.Clip(n.env),
		"RAFT_BOOTSTRAP_EXPECT="+strconv.Itoa(n.nodes),
		"RAFT_JOIN="+n.raft,
		"CLUSTER_JOIN="+strings.Join(join, ","))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("weaviatetest: start %s: %w", n.Name, err)
	}
	r := &run{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	n.run = r
	return nil
}

// current returns the node's process (nil when there is none).
func (n *Node) current() *run {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.run
}

// poll calls ok every 200 ms until it returns true, the process exits or
// deadline passes; what names the awaited state and limit the time allowed
// in the error.
func (n *Node) poll(deadline time.Time, limit time.Duration, what string, ok func() bool) error {
	r := n.current()
	if r == nil {
		return fmt.Errorf("weaviatetest: %s is not running", n.Name)
	}
	for {
		select {
		case <-r.done:
			return fmt.Errorf("weaviatetest: %s exited (%v) before %s:\n%s", n.Name, r.err, what, n.logTail())
		default:
		}
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("weaviatetest: %s: no %s within %s:\n%s", n.Name, what, limit, n.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) waitReady(deadline time.Time, limit time.Duration) error {
	return n.poll(deadline, limit, "answer on "+n.URL+"/v1/.well-known/ready", n.ready)
}

// ready reports whether the node answers its readiness probe with 200.
func (n *Node) ready() bool {
	resp, err := n.get(context.Background(), "/v1/.well-known/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// get sends a GET for path to the node, with the API key when there is one.
func (n *Node) get(ctx context.Context, path string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if n.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+n.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelBody{resp.Body, cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

func (n *Node) logTail() string {
	b, _ := os.ReadFile(n.logPath())
	return tail(b)
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Kill kills the node's processes with SIGKILL and waits for them; its
// data stays for Restart. It is safe to call more than once. After killing
// a cluster member, see Cluster.WaitLeader.
func (n *Node) Kill() { n.stop(0) }

// Stop stops the node's processes with SIGTERM, then SIGKILL after 20 s,
// and waits for them; its data stays for Restart. It is safe to call more
// than once.
func (n *Node) Stop() { n.stop(20 * time.Second) }

// stop signals the process group: SIGTERM, and SIGKILL after grace (at
// once when grace is 0).
func (n *Node) stop(grace time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.run
	if r == nil {
		return
	}
	pg := -r.cmd.Process.Pid
	if grace > 0 {
		syscall.Kill(pg, syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(grace):
		}
	}
	syscall.Kill(pg, syscall.SIGKILL) // also anything the server left behind
	<-r.done
	r.log.Close()
	n.run = nil
}

// Restart starts the stopped node again on its ports and data and waits,
// up to StartTimeout, until it answers as ready. A cluster member joins
// the gossip of the members that run.
func (n *Node) Restart() error {
	var join []string
	if n.cluster != nil {
		for _, m := range n.cluster.Nodes {
			if m != n && m.PID() != 0 {
				join = append(join, m.gossipAddr())
			}
		}
	}
	if err := n.launch(join); err != nil {
		return err
	}
	if err := n.waitReady(time.Now().Add(StartTimeout), StartTimeout); err != nil {
		n.Kill()
		return err
	}
	return nil
}

// PID is the node's process id (0 when stopped), for benchmarks that read
// its CPU time.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == nil {
		return 0
	}
	return n.run.cmd.Process.Pid
}

// Host is the node's REST address, 127.0.0.1:PORT, as a
// weaviate://HOST:PORT/Class URL takes it.
func (n *Node) Host() string { return "127.0.0.1:" + strconv.Itoa(n.ports.http) }

// GRPCPort is the port of the node's gRPC API on 127.0.0.1.
func (n *Node) GRPCPort() int { return n.ports.grpc }

func (n *Node) gossipAddr() string { return "127.0.0.1:" + strconv.Itoa(n.ports.gossip) }

// Cluster is a set of nodes joined into one Weaviate cluster on 127.0.0.1.
type Cluster struct {
	// Nodes are the members, Nodes[i] named node<i+1>; node1 is the one
	// the others join first.
	Nodes []*Node
}

// StartCluster starts n nodes joined into one cluster, each in its own
// temporary folder of t, waits until it is healthy (see WaitHealthy) and
// stops the nodes when t ends. It fails t when weaviate-server cannot be built
// or the cluster is not healthy within ClusterStartTimeout.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("weaviatetest: a cluster of %d nodes", n)
	}
	bin := binary(t)
	deadline := time.Now().Add(ClusterStartTimeout)
	var pp portPicker
	ps := make([]ports, n)
	for i := range ps {
		var err error
		if ps[i], err = pp.ports(); err != nil {
			pp.release()
			t.Fatal(err)
		}
	}
	pp.release()
	// RAFT_JOIN lists every voter as name:raftport; a node takes the other
	// nodes' Raft ports from it (their RPC ports are Raft port + 1).
	var raft []string
	for i, p := range ps {
		raft = append(raft, fmt.Sprintf("node%d:%d", i+1, p.raft))
	}
	c := &Cluster{}
	for i, p := range ps {
		node := newNode(bin, t.TempDir(), i+1, p, "")
		node.cluster, node.nodes, node.raft = c, n, strings.Join(raft, ",")
		c.Nodes = append(c.Nodes, node)
	}
	t.Cleanup(c.stop)
	for _, node := range c.Nodes {
		logOnFailure(t, node)
	}
	for i, node := range c.Nodes {
		var join []string
		for _, m := range c.Nodes[:i] {
			join = append(join, m.gossipAddr())
		}
		if err := node.launch(join); err != nil {
			t.Fatal(err)
		}
		// The next node joins this one's gossip, so wait until it listens.
		if err := node.poll(deadline, ClusterStartTimeout, "gossip on "+node.gossipAddr(), func() bool {
			conn, err := net.DialTimeout("tcp", node.gossipAddr(), time.Second)
			if err == nil {
				conn.Close()
			}
			return err == nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range c.Nodes {
		if err := node.waitReady(deadline, ClusterStartTimeout); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("%v\nnode1's log ends:\n%s", err, c.Nodes[0].logTail())
	}
	return c
}

// stop stops all nodes at once.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}

// WaitHealthy waits until every running node lists all the cluster's nodes
// with status HEALTHY (GET /v1/nodes) and names the same running node as
// Raft leader, or ctx ends; its error then says what was last seen.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return c.wait(ctx, "healthy", func() error {
		if err := c.healthy(ctx); err != nil {
			return err
		}
		_, err := c.leader(ctx)
		return err
	})
}

// WaitLeader waits until every running node names the same running node
// as Raft leader (GET /v1/cluster/statistics), or ctx ends, and returns
// that node. When the leader is killed, a request that needs the schema
// and reaches a node before it knows the new leader waits on the dead one
// without limit (Weaviate asks the leader for collections, with gRPC's
// wait-for-ready); call WaitLeader after Kill before sending more.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	var leader *Node
	err := c.wait(ctx, "without a leader", func() error {
		var err error
		leader, err = c.leader(ctx)
		return err
	})
	return leader, err
}

// wait calls check every 250 ms until it returns nil or ctx ends.
func (c *Cluster) wait(ctx context.Context, what string, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("weaviatetest: cluster %s: %w", what, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// healthy returns nil when every running node lists all nodes HEALTHY,
// else what is amiss.
func (c *Cluster) healthy(ctx context.Context) error {
	live := 0
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		live++
		status, err := n.nodeStatus(ctx)
		if err != nil {
			return err
		}
		for _, m := range c.Nodes {
			if s := status[m.Name]; s != "HEALTHY" {
				if s == "" {
					s = "missing"
				}
				return fmt.Errorf("%s lists %s as %s", n.Name, m.Name, s)
			}
		}
	}
	if live == 0 {
		return errors.New("no node runs")
	}
	return nil
}

// leader returns the running node every running node names as its Raft
// leader, else an error saying what is amiss.
func (c *Cluster) leader(ctx context.Context) (*Node, error) {
	var leader *Node
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		id, err := n.leaderID(ctx)
		if err != nil {
			return nil, err
		}
		var l *Node
		for _, m := range c.Nodes {
			if m.Name == id && m.PID() != 0 {
				l = m
			}
		}
		switch {
		case l == nil && id == "":
			return nil, fmt.Errorf("%s knows no leader", n.Name)
		case l == nil:
			return nil, fmt.Errorf("%s names %s, which does not run, leader", n.Name, id)
		case leader != nil && l != leader:
			return nil, fmt.Errorf("%s names %s leader, another node %s", n.Name, l.Name, leader.Name)
		}
		leader = l
	}
	if leader == nil {
		return nil, errors.New("no node runs")
	}
	return leader, nil
}

// leaderID returns the name of the node n takes for Raft leader ("" when
// it knows none).
func (n *Node) leaderID(ctx context.Context) (string, error) {
	var body struct {
		Statistics []struct {
			Name     string
			LeaderID any
		}
	}
	if err := n.getJSON(ctx, "/v1/cluster/statistics", &body); err != nil {
		return "", err
	}
	for _, s := range body.Statistics {
		if s.Name == n.Name {
			id, _ := s.LeaderID.(string)
			return id, nil
		}
	}
	return "", fmt.Errorf("%s: GET /v1/cluster/statistics: no statistics of %s", n.Name, n.Name)
}

// getJSON decodes the answer to a GET for path into v.
func (n *Node) getJSON(ctx context.Context, path string, v any) error {
	resp, err := n.get(ctx, path)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: GET %s: %w", n.Name, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: GET %s: %s: %s", n.Name, path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: GET %s: %w", n.Name, path, err)
	}
	return nil
}

// nodeStatus returns the status of each node n lists.
func (n *Node) nodeStatus(ctx context.Context) (map[string]string, error) {
	var body struct {
		Nodes []struct{ Name, Status string }
	}
	if err := n.getJSON(ctx, "/v1/nodes", &body); err != nil {
		return nil, err
	}
	status := map[string]string{}
	for _, m := range body.Nodes {
		status[m.Name] = m.Status
	}
	return status, nil
}

// portPicker finds free ports, holding each until release so that no port
// is handed out twice. It tries them on all interfaces: Weaviate binds its
// data and gRPC ports there whatever CLUSTER_BIND_ADDR says. The ports
// are drawn below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port from that range can be
// taken, while a node is stopped, as the local port of some outgoing
// connection, and the node's restart then fails with "address already in
// use".
type portPicker struct {
	held []io.Closer
	lo   int // the first port of the ephemeral range; 0 until read
}

func (pp *portPicker) release() {
	for _, c := range pp.held {
		c.Close()
	}
	pp.held = nil
}

// candidate returns a port to try: a random one in the half of the port
// space below the ephemeral range, or 0 (the kernel's choice) where that
// range cannot be read or leaves too little room.
func (pp *portPicker) candidate() int {
	if pp.lo == 0 {
		pp.lo = -1
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if lo, err := strconv.Atoi(f[0]); err == nil && lo >= 4096 {
					pp.lo = lo
				}
			}
		}
	}
	if pp.lo < 0 {
		return 0
	}
	return pp.lo/2 + rand.IntN(pp.lo/2-1) // leaves pp.lo-1 free for p+1
}

// ports picks a node's six ports: gossip and data, and Raft and Raft RPC,
// as adjacent pairs.
func (pp *portPicker) ports() (ports, error) {
	var p ports
	var err error
	if p.http, err = pp.pick(false); err != nil {
		return p, err
	}
	if p.gossip, err = pp.pick(true); err != nil {
		return p, err
	}
	if p.raft, err = pp.pick(true); err != nil {
		return p, err
	}
	if p.grpc, err = pp.pick(false); err != nil {
		return p, err
	}
	p.data, p.rpc = p.gossip+1, p.raft+1
	return p, nil
}

// pick returns a free TCP port; with pair, one whose UDP port (gossip
// uses both) and next TCP port are free too.
func (pp *portPicker) pick(pair bool) (int, error) {
	for range 1000 {
		c := pp.candidate()
		l, err := net.Listen("tcp", ":"+strconv.Itoa(c))
		if err != nil {
			if c != 0 {
				continue // taken
			}
			return 0, fmt.Errorf("weaviatetest: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if !pair {
			pp.held = append(pp.held, l)
			return p, nil
		}
		u, err := net.ListenPacket("udp", ":"+strconv.Itoa(p))
		if err != nil {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", ":"+strconv.Itoa(p+1))
		if err != nil {
			l.Close()
			u.Close()
			continue
		}
		pp.held = append(pp.held, l, u, l2)
		return p, nil
	}
	return 0, errors.New("weaviatetest: no free pair of ports")
}
