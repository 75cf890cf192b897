package batch

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
)

// Shard selects the part of a job one process takes: the files whose path
// hash modulo Count is Index. The zero value (Count 0) takes everything.
type Shard struct {
	Index, Count int
}

// Active reports whether the job is split into several shards.
func (s Shard) Active() bool { return s.Count > 1 }

// Takes reports whether this shard takes the file with relative path rel.
// The hash is FNV-1a 64 of the slash-separated relative path, so every
// process agrees on the split whatever machine it runs on.
func (s Shard) Takes(rel string) bool {
	if s.Count <= 1 {
		return true
	}
	return ShardOf(rel, s.Count) == s.Index
}

// ShardOf returns the shard index in [0, count) of a relative path.
func ShardOf(rel string, count int) int {
	h := fnv.New64a()
	h.Write([]byte(rel))
	return int(h.Sum64() % uint64(count))
}

// ManifestName returns the manifest file name of this shard:
// manifest.jsonl, or manifest-<i>-of-<n>.jsonl when sharded.
func (s Shard) ManifestName() string {
	if !s.Active() {
		return "manifest.jsonl"
	}
	return fmt.Sprintf("manifest-%d-of-%d.jsonl", s.Index, s.Count)
}

// shardEnv lists the environment variables that give the shard index when
// none is given, in the order they are read: Kubernetes Indexed Jobs, AWS
// Batch array jobs, then Slurm job arrays (SLURM_ARRAY_TASK_ID, counted
// from SLURM_ARRAY_TASK_MIN).
var shardEnv = []string{"JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ARRAY_INDEX", "SLURM_ARRAY_TASK_ID"}

// ResolveShard checks index and count, taking the index from the
// environment (shardEnv) when index < 0 and count > 1. A Slurm job array
// also gives the count: with count 0 and SLURM_ARRAY_TASK_COUNT set, the
// array's tasks are the shards, and task SLURM_ARRAY_TASK_ID −
// SLURM_ARRAY_TASK_MIN is the index (sbatch --array=0-7 or 1-8 alike).
func ResolveShard(index, count int, getenv func(string) string) (Shard, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if count == 0 && getenv("SLURM_ARRAY_TASK_COUNT") != "" {
		n, err := strconv.Atoi(getenv("SLURM_ARRAY_TASK_COUNT"))
		if err != nil || n < 1 {
			return Shard{}, fmt.Errorf("batch: SLURM_ARRAY_TASK_COUNT=%q is not a task count", getenv("SLURM_ARRAY_TASK_COUNT"))
		}
		count = n
	}
	if count < 0 {
		return Shard{}, fmt.Errorf("batch: shard count %d is negative", count)
	}
	if count <= 1 {
		if index > 0 {
			return Shard{}, fmt.Errorf("batch: shard index %d needs a shard count above %d", index, index)
		}
		return Shard{Index: 0, Count: count}, nil
	}
	if index < 0 {
		for _, name := range shardEnv {
			if v := getenv(name); v != "" {
				i, err := strconv.Atoi(v)
				if err != nil {
					return Shard{}, fmt.Errorf("batch: %s=%q is not a shard index", name, v)
				}
				if name == "SLURM_ARRAY_TASK_ID" && getenv("SLURM_ARRAY_TASK_MIN") != "" {
					lo, err := strconv.Atoi(getenv("SLURM_ARRAY_TASK_MIN"))
					if err != nil {
						return Shard{}, fmt.Errorf("batch: SLURM_ARRAY_TASK_MIN=%q is not a task id", getenv("SLURM_ARRAY_TASK_MIN"))
					}
					i -= lo
				}
				index = i
				break
			}
		}
		if index < 0 {
			return Shard{}, fmt.Errorf("batch: shard count %d given without a shard index (give one, or set %s)", count, shardEnv[0])
		}
	}
	if index >= count {
		return Shard{}, fmt.Errorf("batch: shard index %d out of range for %d shards", index, count)
	}
	return Shard{Index: index, Count: count}, nil
}
