// Package slurmtest runs a one-node Slurm cluster for tests that submit
// real batch jobs: munged, slurmctld and slurmd started as the current user
// (root on the CI machines), their keys, configuration, state, spool and
// logs in one temporary folder, on free ports. .ci/slurm installs Slurm and
// MUNGE (Debian's slurm-wlm and munge packages).
package slurmtest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binaries are the programs a Cluster runs: the daemons and the commands
// the tests call.
var Binaries = []string{"munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo"}

// Cluster is a running one-node Slurm cluster.
type Cluster struct {
	// Dir holds everything the cluster writes: munge.key, slurm.conf,
	// state, spool, pid and log files.
	Dir string
	// Conf is the path of slurm.conf, given to every command as SLURM_CONF.
	Conf string
	// Node is the node's name (the host name); its partition is "p".
	Node string
	// CPUs is the node's CPU count as slurm.conf declares it.
	CPUs int

	t      testing.TB
	bins   map[string]string
	daemon []*daemon
	jobs   []string
}

// daemon is one started daemon, stopped by its pid.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Lookup returns the path of a Slurm or MUNGE program: on PATH, else in
// /usr/sbin or /usr/bin (the daemons are in /usr/sbin, often not on a
// user's PATH).
func Lookup(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found", name)
}

// Start starts munged, slurmctld and slurmd, and waits for the node to be
// idle. It skips the test where Slurm cannot run: not Linux, or Slurm's or
// MUNGE's programs not installed. Every daemon is stopped by its pid when
// the test ends, passed or failed, after the jobs it submitted are
// cancelled.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("Slurm runs on Linux only, not %s", runtime.GOOS)
	}
	bins := map[string]string{}
	for _, b := range Binaries {
		p, err := Lookup(b)
		if err != nil {
			t.Skipf("Slurm is not installed (%v; .ci/slurm installs slurm-wlm and munge)", err)
		}
		bins[b] = p
	}
	me, err := user.Current()
	if err != nil {
		t.Fatalf("slurmtest: current user: %v", err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("slurmtest: host name: %v", err)
	}
	// A short folder: MUNGE's and Slurm's socket paths must fit in
	// sun_path (108 bytes), which t.TempDir's long names can exceed.
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: strings.SplitN(host, ".", 2)[0], CPUs: runtime.NumCPU(), t: t, bins: bins}
	t.Cleanup(func() {
		c.stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("slurmtest: the cluster's files are kept in %s", dir)
		}
	})
	for _, d := range []string{"state", "spool", "munge"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "munge"), 0o700); err != nil {
		t.Fatal(err)
	}

	// MUNGE: a 1 KiB random key, read by munged only (mode 400).
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge", "munge.socket")
	c.start("munged", bins["munged"], "--foreground", "--force", "--key-file="+keyFile, "--socket="+sock,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"))
	if err := c.waitFor("munged's socket", 10*time.Second, func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}

	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`ClusterName=ci
SlurmctldHost=%[1]s
SlurmUser=%[2]s
SlurmdUser=%[2]s
AuthType=auth/munge
AuthInfo=socket=%[3]s
CredType=cred/munge
SlurmctldPort=%[4]d
SlurmdPort=%[5]d
StateSaveLocation=%[6]s/state
SlurmdSpoolDir=%[6]s/spool
SlurmctldPidFile=%[6]s/slurmctld.pid
SlurmdPidFile=%[6]s/slurmd.pid
SlurmctldLogFile=%[6]s/slurmctld.log
SlurmdLogFile=%[6]s/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName=%[1]s CPUs=%[7]d RealMemory=20000 State=UNKNOWN
PartitionName=p Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, c.Node, me.Username, sock, ports[0], ports[1], dir, c.CPUs)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start("slurmctld", bins["slurmctld"], "-D", "-i", "-f", c.Conf)
	c.start("slurmd", bins["slurmd"], "-D", "-f", c.Conf, "-N", c.Node)
	if err := c.waitFor("the node to be idle", 60*time.Second, func() (bool, string) {
		out, err := c.Command("sinfo", "-h", "-N", "-o", "%t").CombinedOutput()
		s := strings.TrimSpace(string(out))
		return err == nil && s == "idle", s
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs a daemon in the foreground, as a child, its output in
// Dir/<name>.out.
func (c *Cluster) start(name, bin string, args ...string) {
	c.t.Helper()
	out, err := os.Create(filepath.Join(c.Dir, name+".out"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = c.Env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = daemonAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		c.t.Fatalf("slurmtest: start %s: %v", name, err)
	}
	out.Close()
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemon = append(c.daemon, d)
}

// stop cancels the jobs submitted and stops the daemons by their pids,
// slurmd first: SIGTERM, then SIGKILL after 10 s.
func (c *Cluster) stop() {
	if len(c.jobs) > 0 {
		c.Command("scancel", c.jobs...).Run()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			out, err := c.Command("squeue", "-h", "-o", "%i").Output()
			if err != nil || strings.TrimSpace(string(out)) == "" {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for i := len(c.daemon) - 1; i >= 0; i-- {
		d := c.daemon[i]
		pid := d.cmd.Process.Pid
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			c.t.Logf("slurmtest: %s (pid %d) did not stop on SIGTERM; killing it", d.name, pid)
			d.cmd.Process.Kill()
			<-d.done
		}
	}
	c.daemon = nil
}

// waitFor polls ok every 100 ms until it holds, returning an error after
// timeout with the last state ok reported, or when a daemon has exited,
// with the daemons' logs.
func (c *Cluster) waitFor(what string, timeout time.Duration, ok func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, state := ok()
		if done {
			return nil
		}
		for _, d := range c.daemon {
			select {
			case <-d.done:
				return fmt.Errorf("slurmtest: %s exited while waiting for %s (%v)\n%s", d.name, what, d.cmd.ProcessState, c.Logs())
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurmtest: no %s after %s (last: %s)\n%s", what, timeout, state, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitFor polls ok every 100 ms until it holds, and returns an error
// after timeout or when a daemon has exited.
func (c *Cluster) WaitFor(what string, timeout time.Duration, ok func() bool) error {
	return c.waitFor(what, timeout, func() (bool, string) { return ok(), "not yet" })
}

// Logs returns the tails of the daemons' logs, for a failure's message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range []string{"munge/munged.log", "munged.out", "slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"} {
		data, err := os.ReadFile(filepath.Join(c.Dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// Env returns the environment the cluster's commands run with: this
// process's, with SLURM_CONF set.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "SLURM_CONF="+c.Conf)
}

// Command returns a Slurm command (sbatch, scontrol, ...) set up to talk
// to this cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	bin, ok := c.bins[name]
	if !ok {
		var err error
		if bin, err = Lookup(name); err != nil {
			bin = name
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = c.Env()
	return cmd
}

// Version returns Slurm's version, as sinfo --version prints it
// ("slurm 22.05.8").
func (c *Cluster) Version() string {
	out, err := c.Command("sinfo", "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Submit runs sbatch --parsable with args (options, the script and its
// arguments) and env added to the environment the job inherits, and
// returns the job id.
func (c *Cluster) Submit(env []string, args ...string) (string, error) {
	cmd := c.Command("sbatch", append([]string{"--parsable"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("sbatch %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	c.jobs = append(c.jobs, id)
	return id, nil
}

// Task is one array task's (or a single job's) state, from scontrol show
// job.
type Task struct {
	JobID    string // the array's job id (ArrayJobId), or the job's
	TaskID   string // ArrayTaskId: a task id, or a range of pending ones
	State    string // JobState: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
	ExitCode string // code:signal
	Fields   map[string]string
}

// ID returns the task's id as scancel and scontrol take it: JOBID_TASK.
func (t Task) ID() string {
	if t.TaskID == "" {
		return t.JobID
	}
	return t.JobID + "_" + t.TaskID
}

// Finished reports whether the task has ended (and is not to be run
// again).
func (t Task) Finished() bool {
	switch t.State {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED":
		return true
	}
	return false
}

// Tasks returns the tasks of job id (a job or an array job) as slurmctld
// holds them now.
func (c *Cluster) Tasks(id string) ([]Task, error) {
	out, err := c.Command("scontrol", "show", "job", "-o", id).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("scontrol show job %s: %v: %s", id, err, out)
	}
	var tasks []Task
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["JobId"] == "" {
			continue
		}
		t := Task{JobID: f["JobId"], State: f["JobState"], ExitCode: f["ExitCode"], Fields: f}
		if a := f["ArrayJobId"]; a != "" {
			t.JobID, t.TaskID = a, f["ArrayTaskId"]
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// Wait waits until every task of job id has finished (see Task.Finished)
// and returns them; it returns an error after timeout.
func (c *Cluster) Wait(id string, timeout time.Duration) ([]Task, error) {
	var tasks []Task
	err := c.waitFor("end of job "+id, timeout, func() (bool, string) {
		var err error
		tasks, err = c.Tasks(id)
		if err != nil {
			return false, err.Error()
		}
		var states []string
		all := len(tasks) > 0
		for _, t := range tasks {
			states = append(states, t.ID()+"="+t.State)
			all = all && t.Finished()
		}
		return all, strings.Join(states, " ")
	})
	return tasks, err
}

// WaitState waits until task id (JOBID_TASK) is in state and returns it;
// it returns an error after timeout.
func (c *Cluster) WaitState(id, state string, timeout time.Duration) (Task, error) {
	var task Task
	err := c.waitFor(id+" "+state, timeout, func() (bool, string) {
		tasks, err := c.Tasks(id)
		if err != nil || len(tasks) != 1 {
			return false, fmt.Sprint(tasks, err)
		}
		task = tasks[0]
		return task.State == state, task.State
	})
	return task, err
}

// Cancel cancels a job or array task (JOBID_TASK) with scancel: its
// processes get SIGTERM, then SIGKILL KillWait (5 s) later.
func (c *Cluster) Cancel(id string) error {
	if out, err := c.Command("scancel", id).CombinedOutput(); err != nil {
		return fmt.Errorf("scancel %s: %v: %s", id, err, out)
	}
	return nil
}

// Requeue puts a job or array task (JOBID_TASK), running or finished,
// back in the queue with scontrol requeue; it runs again with the same
// array variables. slurmctld holds a requeued job back (its begin time
// about two minutes on); Requeue then makes it eligible at once with
// scontrol update StartTime=now.
func (c *Cluster) Requeue(id string) error {
	if out, err := c.Command("scontrol", "requeue", id).CombinedOutput(); err != nil {
		return fmt.Errorf("scontrol requeue %s: %v: %s", id, err, out)
	}
	if out, err := c.Command("scontrol", "update", "JobId="+id, "StartTime=now").CombinedOutput(); err != nil {
		return fmt.Errorf("scontrol update JobId=%s StartTime=now: %v: %s", id, err, out)
	}
	return nil
}

// freePorts returns n TCP ports free on this machine now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
