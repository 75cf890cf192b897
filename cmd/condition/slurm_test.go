package main_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/slurmtest"
)

// jobArgs are the arguments the tests add to the script's condition run:
// small output shards, so that a resumed task finds some whole; one image
// per encoder call, so that a task lasts long enough to be cancelled; JSON
// logs, read back from the tasks' output files.
var jobArgs = []string{"--shard-size", "100", "--batch", "1", "--log-format", "json"}

// heavy is the tar shard with many images, the one whose task is cancelled
// mid-run; the others hold few.
const heavy = "000000.tar"

// TestSlurmArray runs the Slurm script of docs/scale-out.md, verbatim, as
// job arrays of condition run over WebDataset shards on a one-node
// cluster, and proves each output with condition merge.
func TestSlurmArray(t *testing.T) {
	c := slurmtest.Start(t)
	t.Logf("%s, one node of %d CPUs", c.Version(), c.CPUs)
	root := moduleRoot(t)
	script := docScript(t, filepath.Join(root, "docs", "scale-out.md"))
	dir := t.TempDir()
	bin := buildCondition(t, root, dir)
	scriptPath := filepath.Join(dir, "condition.sbatch")
	if err := os.WriteFile(scriptPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	prompts := filepath.Join(dir, "prompts.txt")
	if err := os.WriteFile(prompts, []byte("a red square\na blue circle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &arrays{t: t, c: c, dir: dir, bin: bin, script: scriptPath, prompts: prompts}

	// Eight tar shards: the heavy one with 1200 images, the others 5 each.
	big := filepath.Join(dir, "big")
	var bigImages []string
	for i := range 8 {
		n := 5
		if i == 0 {
			n = 1200
		}
		bigImages = append(bigImages, writeTar(t, filepath.Join(big, fmt.Sprintf("%06d.tar", i)), n, uint64(i))...)
	}
	bigPattern := filepath.Join(big, "{000000..000007}.tar")
	// The same without the heavy shard, for the quicker runs.
	small := filepath.Join(dir, "small")
	var smallImages []string
	for i := 1; i < 8; i++ {
		smallImages = append(smallImages, writeTar(t, filepath.Join(small, fmt.Sprintf("%06d.tar", i)), 5, uint64(i))...)
	}
	smallPattern := filepath.Join(small, "{000001..000007}.tar")

	heavyTask := -1
	var procOf map[string]int // each image's process, in the array subtest
	var whole map[string][]byte
	var wholeManifest map[string]string
	t.Run("array", func(t *testing.T) {
		j.t = t
		out, tasks := j.run("array", bigPattern, []string{"--array=0-3"}, nil)
		checkTasks(t, tasks, map[string]string{"0": "0:0", "1": "0:0", "2": "0:0", "3": "0:0"})
		rep := j.mergeComplete(out, bigPattern, len(bigImages))
		byProc := manifestProcs(t, out, 4, bigImages)
		procOf = byProc
		if p, ok := byProc[strings.TrimSuffix(heavy, ".tar")+"/"+imageKey(0)+".png"]; ok {
			heavyTask = p
		}
		if !slices.Equal(rep.ProcessSeen, []int{0, 1, 2, 3}) {
			t.Errorf("processes seen %v, want every one of 4 (the tar shards' hashes leave one without work: rename them)", rep.ProcessSeen)
		}
		// Every task logged its own shard, from the array's variables.
		for _, task := range tasks {
			job := jobLine(t, j.logOf(task))
			if want := task.TaskID + "/4"; job["shard"] != want {
				t.Errorf("task %s: job logged shard %v, want %s", task.ID(), job["shard"], want)
			}
			checkThreads(t, task, job, 1)
		}
		whole, wholeManifest = outputs(t, out), manifestEntries(t, out)
		t.Logf("%d images in %d output files; tar shard %s in task %d", len(bigImages), len(whole), heavy, heavyTask)
	})
	t.Run("cancel-requeue-resume", func(t *testing.T) {
		j.t = t
		if heavyTask < 0 || whole == nil {
			t.Fatal("no uninterrupted run to compare with (subtest array)")
		}
		out := filepath.Join(dir, "cancel")
		id := j.submit(bigPattern, out, []string{"--array=0-3"}, nil)
		task := fmt.Sprintf("%s_%d", id, heavyTask)
		manifest := filepath.Join(out, fmt.Sprintf("manifest-%d-of-4.jsonl", heavyTask))
		// Cancel the heavy task once it has written some whole output
		// shards (100 images each) and is part-way through the next.
		var before int
		if err := c.WaitFor("250 images in "+manifest, 60*time.Second, func() bool {
			before = countLines(manifest)
			return before >= 250
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(task); err != nil {
			t.Fatal(err)
		}
		cancelled, err := c.WaitState(task, "CANCELLED", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		after := countLines(manifest)
		t.Logf("cancelled %s at %d images (%d when scancel ran), exit %s", task, after, before, cancelled.ExitCode)
		if after >= 1200 {
			t.Fatalf("task %s had finished all 1200 images of %s before it was cancelled: make it slower", task, heavy)
		}
		// Once the other tasks are done, merge proves the array
		// incomplete, naming the images no whole shard holds: the
		// cancelled task's after its last whole shard.
		if _, err := c.Wait(id, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		rep, code, text := j.merge(out, bigPattern)
		own := 0
		for _, p := range procOf {
			if p == heavyTask {
				own++
			}
		}
		if code != 1 || len(rep.Missing) == 0 || (own-len(rep.Missing))%100 != 0 || len(rep.Missing) > own-100 {
			t.Errorf("merge after the cancel: exit %d, %d missing; want exit 1 and the cancelled task's images (%d) less its whole shards (100 each)\n%s", code, len(rep.Missing), own, text)
		}
		for _, m := range rep.Missing {
			if procOf[m] != heavyTask {
				t.Errorf("merge after the cancel: %s missing, not the cancelled task's", m)
			}
		}
		if !strings.Contains(text, fmt.Sprintf("missing (%d): 000000/", len(rep.Missing))) {
			t.Errorf("merge after the cancel does not name the missing images:\n%s", text)
		}
		if err := c.Requeue(task); err != nil {
			t.Fatal(err)
		}
		tasks, err := c.Wait(id, 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		checkTasks(t, tasks, map[string]string{"0": "0:0", "1": "0:0", "2": "0:0", "3": "0:0"})
		for _, tk := range tasks {
			if tk.TaskID == strconv.Itoa(heavyTask) && tk.Fields["Restarts"] != "1" {
				t.Errorf("task %s: Restarts=%s, want 1 (requeued once)", tk.ID(), tk.Fields["Restarts"])
			}
		}
		// The requeued task resumed: it skipped what the first attempt
		// finished, and did the rest.
		sum := summaryLine(t, j.logOf(slurmtest.Task{JobID: id, TaskID: strconv.Itoa(heavyTask)}))
		t.Logf("the requeued task: %v", sum)
		if sk, _ := sum["skipped"].(float64); sk < 100 {
			t.Errorf("the requeued task skipped %v images, want at least the first whole shard's 100", sum["skipped"])
		}
		j.mergeComplete(out, bigPattern, len(bigImages))
		manifestProcs(t, out, 4, bigImages)
		compareOutputs(t, whole, outputs(t, out))
		if got := manifestEntries(t, out); !reflect.DeepEqual(got, wholeManifest) {
			t.Errorf("the manifests (timings aside) differ from the uninterrupted run's: %s", diffKeys(wholeManifest, got))
		}
	})

	t.Run("failing-task", func(t *testing.T) {
		j.t = t
		// The small shards and one more, cut off in the middle of a member.
		in := filepath.Join(dir, "failing")
		var images []string
		for i := 1; i < 8; i++ {
			images = append(images, writeTar(t, filepath.Join(in, fmt.Sprintf("%06d.tar", i)), 5, uint64(i))...)
		}
		bad := filepath.Join(in, "000008.tar")
		writeTar(t, bad, 5, 8)
		b, err := os.ReadFile(bad)
		if err != nil {
			t.Fatal(err)
		}
		// Cut in the middle of the third image. (Cut at a member's end,
		// or in its padding, a tar reads as a shorter whole one: Go's
		// archive/tar does not ask for the end-of-archive blocks.)
		cut := 0
		for range 3 {
			cut += bytes.Index(b[cut+1:], []byte("\x89PNG")) + 1
		}
		if err := os.WriteFile(bad, b[:cut+30], 0o644); err != nil {
			t.Fatal(err)
		}
		pattern := filepath.Join(in, "{000001..000008}.tar")
		out, tasks := j.run("failing", pattern, []string{"--array=0-3"}, nil)
		failed := ""
		for _, tk := range tasks {
			switch {
			case tk.State == "FAILED" && tk.ExitCode == "1:0" && failed == "":
				failed = tk.TaskID
			case tk.State != "COMPLETED" || tk.ExitCode != "0:0":
				t.Errorf("task %s: %s, exit %s; want one task FAILED with exit 1 (the one with the cut shard) and the others COMPLETED", tk.ID(), tk.State, tk.ExitCode)
			}
		}
		if failed == "" {
			for _, tk := range tasks {
				t.Logf("%s:\n%s", tk.ID(), j.logOf(tk))
			}
			t.Fatalf("no task failed with exit 1")
		}
		log := j.logOf(slurmtest.Task{JobID: tasks[0].JobID, TaskID: failed})
		if !strings.Contains(log, "000008.tar") {
			t.Errorf("the failed task's log does not name the cut shard:\n%s", log)
		}
		// The cut shard's whole samples are done, the cut one and the
		// rest of the shard failed: in the failed task's manifest, and
		// counted by merge (which holds the shards layout complete when
		// every image has its row, ok or failed, and exits 0).
		var failedPaths []string
		for _, e := range readManifest(t, filepath.Join(out, "manifest-"+failed+"-of-4.jsonl")) {
			if e["status"] != "ok" {
				failedPaths = append(failedPaths, e["path"].(string))
				if p := e["path"].(string); !strings.HasPrefix(p, "000008/") {
					t.Errorf("%s failed: %v", p, e["error"])
				}
			}
		}
		sort.Strings(failedPaths)
		if want := []string{"000008/(truncated)", "000008/000002.png"}; !slices.Equal(failedPaths, want) {
			t.Errorf("failed images %v, want %v", failedPaths, want)
		}
		rep, code, text := j.merge(out, pattern)
		t.Logf("merge (exit %d):\n%s", code, text)
		if n := len(images) + 2 + 2; rep.Images != n || rep.OK != n-2 || rep.Failed != 2 || len(rep.Missing) != 0 {
			t.Errorf("merge: %d images (%d ok, %d failed), missing %v; want %d (%d ok, 2 failed), none missing", rep.Images, rep.OK, rep.Failed, rep.Missing, n, n-2)
		}
	})

	var oneBased map[string][]byte
	t.Run("one-based", func(t *testing.T) {
		j.t = t
		out, tasks := j.run("one-based", smallPattern, []string{"--array=1-4"}, nil)
		checkTasks(t, tasks, map[string]string{"1": "0:0", "2": "0:0", "3": "0:0", "4": "0:0"})
		j.mergeComplete(out, smallPattern, len(smallImages))
		manifestProcs(t, out, 4, smallImages)
		for _, task := range tasks {
			job := jobLine(t, j.logOf(task))
			n, _ := strconv.Atoi(task.TaskID)
			if want := fmt.Sprintf("%d/4", n-1); job["shard"] != want {
				t.Errorf("task %s: job logged shard %v, want %s (the task id less SLURM_ARRAY_TASK_MIN)", task.ID(), job["shard"], want)
			}
		}
		oneBased = outputs(t, out)
	})

	t.Run("explicit-count", func(t *testing.T) {
		j.t = t
		out, tasks := j.run("explicit", smallPattern, []string{"--array=0-3"}, []string{"--shard-count", "4"})
		checkTasks(t, tasks, map[string]string{"0": "0:0", "1": "0:0", "2": "0:0", "3": "0:0"})
		j.mergeComplete(out, smallPattern, len(smallImages))
		manifestProcs(t, out, 4, smallImages)
		if oneBased != nil {
			compareOutputs(t, oneBased, outputs(t, out))
		}
	})

	t.Run("threads", func(t *testing.T) {
		j.t = t
		// Tasks of 2 CPUs (the node's): one encoder stream of 2 threads,
		// not the two streams of one thread condition run picks on 2 cores
		// outside Slurm; the array subtest's tasks of 1 CPU ran one of 1.
		out := filepath.Join(dir, "threads")
		id := j.submit(smallPattern, out, []string{"--array=0-1", "--cpus-per-task=2"}, []string{"--shard-count", "2"})
		tasks, err := j.c.Wait(id, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		checkTasks(t, tasks, map[string]string{"0": "0:0", "1": "0:0"})
		for _, task := range tasks {
			if task.Fields["NumCPUs"] != "2" {
				t.Errorf("task %s: NumCPUs=%s, want 2", task.ID(), task.Fields["NumCPUs"])
			}
			checkThreads(t, task, jobLine(t, j.logOf(task)), 2)
		}
	})
}

// checkThreads checks that condition run's job line (of a task with cpus
// CPUs, SLURM_CPUS_PER_TASK) logs one encoder stream of cpus threads.
func checkThreads(t *testing.T, task slurmtest.Task, job map[string]any, cpus int) {
	t.Helper()
	threads, ok1 := job["threads"].(float64)
	streams, ok2 := job["streams"].(float64)
	switch {
	case !ok1 || !ok2:
		t.Errorf("task %s: condition run's job line logs no threads and streams: %v", task.ID(), job)
	case int(threads) != cpus || streams != 1:
		t.Errorf("task %s: %v streams of %v threads, want one of SLURM_CPUS_PER_TASK=%d", task.ID(), streams, threads, cpus)
	}
}

// arrays submits the doc's script to a cluster.
type arrays struct {
	t                         *testing.T
	c                         *slurmtest.Cluster
	dir, bin, script, prompts string
}

// submit submits the script with IMAGES, OUT, PROMPTS and CONDITION set,
// sbatch's options and the script's arguments (jobArgs, then extra), the
// job's folder being the test's; it returns the job id.
func (j *arrays) submit(images, out string, sbatch, extra []string) string {
	j.t.Helper()
	env := []string{"CONDITION=" + j.bin, "IMAGES=" + images, "PROMPTS=" + j.prompts, "OUT=" + out}
	args := append([]string{"--chdir=" + j.dir, "--cpus-per-task=1"}, sbatch...)
	args = append(append(append(args, j.script), jobArgs...), extra...)
	id, err := j.c.Submit(env, args...)
	if err != nil {
		j.t.Fatal(err)
	}
	return id
}

// run submits the script with OUT a new folder named name, waits for the
// job's end and returns the output folder and the tasks.
func (j *arrays) run(name, images string, sbatch, extra []string) (string, []slurmtest.Task) {
	j.t.Helper()
	out := filepath.Join(j.dir, name)
	id := j.submit(images, out, sbatch, extra)
	start := time.Now()
	tasks, err := j.c.Wait(id, 3*time.Minute)
	if err != nil {
		j.t.Fatal(err)
	}
	j.t.Logf("job %s (%s): its tasks ended in %s", id, strings.Join(sbatch, " "), time.Since(start).Round(100*time.Millisecond))
	return out, tasks
}

// logOf returns a task's output file (the script's --output,
// condition-%A_%a.out, in the job's folder).
func (j *arrays) logOf(task slurmtest.Task) string {
	j.t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, fmt.Sprintf("condition-%s_%s.out", task.JobID, task.TaskID)))
	if err != nil {
		j.t.Fatal(err)
	}
	return string(b)
}

// shardsReport is condition merge --json's report on a shards-layout
// output.
type shardsReport struct {
	Processes   int      `json:"processes"`
	ProcessSeen []int    `json:"processes_seen"`
	Shards      int      `json:"shards"`
	Images      int      `json:"images"`
	OK          int      `json:"ok"`
	Failed      int      `json:"failed"`
	Settings    []string `json:"settings"`
	Broken      []string `json:"broken"`
	Duplicated  []string `json:"duplicated"`
	Misassigned []string `json:"misassigned"`
	Missing     []string `json:"missing"`
	Unexpected  []string `json:"unexpected"`
	Checked     bool     `json:"inputs_checked"`
}

// merge runs condition merge --json OUT --images IMAGES, and returns the
// report, the exit code and the text report (a second run without
// --json).
func (j *arrays) merge(out, images string) (shardsReport, int, string) {
	j.t.Helper()
	var rep shardsReport
	cmd := exec.Command(j.bin, "merge", "--json", out, "--images", images)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	code := exitCode(j.t, err)
	if jerr := json.Unmarshal(b, &rep); jerr != nil {
		j.t.Fatalf("condition merge --json %s: exit %d, %v: %s%s", out, code, jerr, b, stderr.Bytes())
	}
	text, err := exec.Command(j.bin, "merge", out, "--images", images).CombinedOutput()
	if c := exitCode(j.t, err); c != code {
		j.t.Errorf("condition merge exits %d, with --json %d", c, code)
	}
	return rep, code, string(text)
}

// mergeComplete runs condition merge and checks it proves the output
// complete: n images, each in exactly one whole shard, from 4 processes of
// one job's settings.
func (j *arrays) mergeComplete(out, images string, n int) shardsReport {
	j.t.Helper()
	rep, code, text := j.merge(out, images)
	if code != 0 || !rep.Checked || rep.Images != n || rep.OK != n || rep.Failed != 0 || rep.Processes != 4 ||
		len(rep.Settings) != 1 || len(rep.Broken)+len(rep.Duplicated)+len(rep.Misassigned)+len(rep.Missing)+len(rep.Unexpected) != 0 {
		j.t.Errorf("condition merge %s: exit %d, want complete with %d images from 4 processes: %+v\n%s", out, code, n, rep, text)
	}
	if !strings.Contains(text, "complete: every input image is in exactly one whole shard") {
		j.t.Errorf("condition merge %s does not say complete:\n%s", out, text)
	}
	return rep
}

// checkTasks checks that the tasks are exactly want's ids, each COMPLETED
// with want's exit code.
func checkTasks(t *testing.T, tasks []slurmtest.Task, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, tk := range tasks {
		got[tk.TaskID] = tk.ExitCode
		if tk.State != "COMPLETED" {
			t.Errorf("task %s: %s (exit %s, reason %s)", tk.ID(), tk.State, tk.ExitCode, tk.Fields["Reason"])
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tasks and exit codes %v, want %v", got, want)
	}
}

// manifestProcs reads manifest-<i>-of-<n>.jsonl of every process and
// checks that every image is in exactly one, with status ok, all the
// images of a tar shard in the same one; it returns each image's process.
func manifestProcs(t *testing.T, out string, n int, images []string) map[string]int {
	t.Helper()
	proc := map[string]int{}
	tarProc := map[string]int{}
	for i := range n {
		name := filepath.Join(out, fmt.Sprintf("manifest-%d-of-%d.jsonl", i, n))
		seen := map[string]bool{}
		for _, e := range readManifest(t, name) {
			p := e["path"].(string)
			if seen[p] {
				continue // a resumed process's later entry of the same image
			}
			seen[p] = true
			if q, dup := proc[p]; dup {
				t.Errorf("%s in the manifests of processes %d and %d", p, q, i)
			}
			proc[p] = i
			if e["status"] != "ok" {
				t.Errorf("%s: %s: status %v: %v", name, p, e["status"], e["error"])
			}
			tr, _, _ := strings.Cut(p, "/")
			if q, ok := tarProc[tr]; ok && q != i {
				t.Errorf("tar shard %s split over processes %d and %d", tr, q, i)
			}
			tarProc[tr] = i
		}
	}
	var got []string
	for p := range proc {
		got = append(got, p)
	}
	sort.Strings(got)
	want := slices.Sorted(slices.Values(images))
	if !slices.Equal(got, want) {
		t.Errorf("the manifests hold %d images, want the %d inputs: %s", len(got), len(want), diffLists(want, got))
	}
	return proc
}

// readManifest parses a JSONL manifest.
func readManifest(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %v: %q", name, err, line)
		}
		list = append(list, e)
	}
	return list
}

// manifestEntries returns every image's last manifest entry over all the
// manifests of out, as JSON without its timings (which differ run to run),
// with the manifest's name.
func manifestEntries(t *testing.T, out string) map[string]string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(out, "manifest-*.jsonl"))
	entries := map[string]string{}
	for _, name := range names {
		for _, e := range readManifest(t, name) {
			delete(e, "timings_ms")
			b, _ := json.Marshal(e)
			entries[e["path"].(string)] = filepath.Base(name) + " " + string(b)
		}
	}
	return entries
}

// outputs returns every file below out but the manifests, by relative
// path.
func outputs(t *testing.T, out string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if m, _ := filepath.Match("manifest*.jsonl", rel); m {
			return nil
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// compareOutputs checks two outputs hold the same files, byte for byte.
func compareOutputs(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	for name, b := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: missing", name)
		case !bytes.Equal(g, b):
			t.Errorf("%s: differs (%d bytes, want %d)", name, len(g), len(b))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not in the uninterrupted run's output", name)
		}
	}
}

// jobLine returns the attributes of condition run's "job" log line (JSON)
// in a task's output.
func jobLine(t *testing.T, log string) map[string]any {
	t.Helper()
	for _, m := range jsonLines(log) {
		if m["msg"] == "job" {
			return m
		}
	}
	t.Fatalf("no job line in the task's output:\n%s", log)
	return nil
}

// summaryLine returns the last "summary" of condition run's JSON log in a
// task's output (a requeued task's output holds both attempts').
func summaryLine(t *testing.T, log string) map[string]any {
	t.Helper()
	var sum map[string]any
	for _, m := range jsonLines(log) {
		if s, ok := m["summary"].(map[string]any); ok {
			sum = s
		}
	}
	if sum == nil {
		t.Fatalf("no summary in the task's output:\n%s", log)
	}
	return sum
}

// jsonLines returns the lines of log that are JSON objects.
func jsonLines(log string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// writeTar writes a WebDataset shard of n samples (KEY.png, 12×12 pixels
// of a seeded random colour each, and KEY.txt, a caption) and returns the
// images' output names, <tar's name without .tar>/<KEY>.png.
func writeTar(t *testing.T, name string, n int, seed uint64) []string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	r := rand.New(rand.NewPCG(seed, 7))
	var names []string
	for i := range n {
		img := image.NewNRGBA(image.Rect(0, 0, 12, 12))
		bg := color.NRGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		fg := color.NRGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
		x0, y0 := r.IntN(8), r.IntN(8)
		for y := range 12 {
			for x := range 12 {
				img.SetNRGBA(x, y, bg)
				if x >= x0 && x < x0+4 && y >= y0 && y < y0+4 {
					img.SetNRGBA(x, y, fg)
				}
			}
		}
		var p bytes.Buffer
		if err := png.Encode(&p, img); err != nil {
			t.Fatal(err)
		}
		key := imageKey(i)
		for _, m := range []struct {
			ext  string
			data []byte
		}{{"png", p.Bytes()}, {"txt", []byte(fmt.Sprintf("a square on a plain ground, sample %d", i))}} {
			if err := tw.WriteHeader(&tar.Header{Name: key + "." + m.ext, Mode: 0o644, Size: int64(len(m.data)), ModTime: time.Unix(0, 0)}); err != nil {
				t.Fatal(err)
			}
			tw.Write(m.data)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(name), ".tar")+"/"+key+".png")
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return names
}

// imageKey is the key of a tar shard's sample i.
func imageKey(i int) string { return fmt.Sprintf("%06d", i) }

// countLines returns the number of whole lines in a file (0 when it does
// not exist).
func countLines(name string) int {
	b, _ := os.ReadFile(name)
	return bytes.Count(b, []byte("\n"))
}

// moduleRoot returns the folder of the module's go.mod, two up from this
// file.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// buildCondition builds cmd/condition into dir.
func buildCondition(t *testing.T, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "condition")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/condition")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/condition: %v\n%s", err, out)
	}
	return bin
}

// docScript returns the sh block that follows the heading "## Slurm" in
// the page doc.
func docScript(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	h := slices.Index(lines, "## Slurm")
	if h < 0 {
		t.Fatalf("%s: no heading \"## Slurm\"", doc)
	}
	var start int
	for start = h + 1; start < len(lines) && lines[start] != "```sh"; start++ {
		if strings.HasPrefix(lines[start], "#") {
			t.Fatalf("%s: no ```sh block under \"## Slurm\"", doc)
		}
	}
	for end := start + 1; end < len(lines); end++ {
		if lines[end] == "```" {
			return strings.Join(lines[start+1:end], "\n") + "\n"
		}
	}
	t.Fatalf("%s: the sh block under \"## Slurm\" does not end", doc)
	return ""
}

// exitCode returns a command's exit code from its Run's error.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// diffLists describes the first differences of two sorted lists.
func diffLists(want, got []string) string {
	var missing, extra []string
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			extra = append(extra, g)
		}
	}
	return fmt.Sprintf("missing %v, extra %v", head(missing), head(extra))
}

// diffKeys describes the first keys whose values differ between two maps.
func diffKeys(want, got map[string]string) string {
	var d []string
	for k, w := range want {
		if g := got[k]; g != w {
			d = append(d, fmt.Sprintf("%s: %q, want %q", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d = append(d, k+": extra")
		}
	}
	sort.Strings(d)
	return strings.Join(head(d), "; ")
}

// head returns the first five of xs, with a count of the rest.
func head(xs []string) []string {
	if len(xs) > 5 {
		return append(xs[:5:5], fmt.Sprintf("… %d more", len(xs)-5))
	}
	return xs
}
