package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// What the memory and CPU figures include, by where the server runs.
const (
	inProcessNote = "nats-server runs in this process: its RSS, Go heap and CPU per run include the server, the worker and the clients"
	processNote   = "nats-server runs in a child process: this process's RSS, Go heap and CPU per run are the worker's (Interlock's service or the floor's pool) and the clients'; the server's RSS (VmRSS, VmHWM) and CPU per run are shown apart"
	// workerProcsNote is added when the workers run in child processes.
	workerProcsNote = "with the workers in child processes (--worker-procs), this process's RSS, Go heap and CPU per run are the clients' alone; the workers' peak RSS and CPU per run are their processes' summed, and the interlock/floor CPU ratio is of the workers' and the clients' CPU together"
)

// serverNotes says what the memory and CPU figures of the measurements o asks for
// include.
func serverNotes(o options) []string {
	notes := []string{inProcessNote}
	if o.server == serverProcess {
		notes = []string{processNote}
	}
	if len(o.workerProcs) > 0 {
		notes = append(notes, workerProcsNote)
	}
	if o.cluster > 1 {
		notes = append(notes, fmt.Sprintf("the server is a %d-node cluster, every stream and bucket with %d replicas: its RSS and data directory are summed over the nodes", o.cluster, o.replicas()))
	}
	return notes
}

// report is everything one invocation measured.
type report struct {
	Machine     machine `json:"machine"`
	Runs        int     `json:"runs"`
	Concurrency int     `json:"concurrency"`
	Workers     int     `json:"workers"`
	Warmup      int     `json:"warmup"`
	PausedRuns  int     `json:"pausedRuns,omitempty"`
	// Server is where nats-server ran: "process" or "inprocess".
	Server string `json:"server"`
	// ClusterNodes is the number of nodes of the server's cluster, 0 for a
	// single server; Replicas is that of every stream and bucket.
	ClusterNodes int `json:"clusterNodes,omitempty"`
	Replicas     int `json:"replicas"`
	// WorkerProcs are the counts of worker processes measured; none when
	// the workers ran in this process.
	WorkerProcs []int `json:"workerProcs,omitempty"`
	// StoredRuns is how many runs each system had stored before each leg.
	StoredRuns int `json:"storedRuns,omitempty"`
	// Client is --client: with "go", the floor's figures are Interlock's
	// driven with raw CloudEvents, and Interlock's are Interlock's driven
	// through the Go client package.
	Client string `json:"client"`
	// Systems are the systems the throughput measurement compared, in
	// the order of --systems: minimum, floor, interlock (driven with raw
	// CloudEvents), client (driven through the Go client package).
	Systems []string `json:"systems"`
	// Notes say what the memory and CPU figures include.
	Notes []string     `json:"notes"`
	Modes []modeResult `json:"modes"`
}

// machine describes where the figures were taken.
type machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpuModel"`
	MemoryMB   int    `json:"memoryMB"`
	GoVersion  string `json:"goVersion"`
	OS         string `json:"os"`
	Date       string `json:"date"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1, 5 and 15 minute
	// load averages when the benchmark started and ended.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

// modeResult is the measurements of one workload in one fsync mode.
type modeResult struct {
	// Workload is "question" or "approval".
	Workload string `json:"workload"`
	// Fsync is "always" (fsync before ack) or "lazy".
	Fsync string `json:"fsync"`
	// Floor, Interlock and Ratio are the throughput measurement with the
	// workers in this process: the first and the second system's two
	// legs combined (see comparison), and Legs every leg in the order
	// they ran. Systems are every system's, with ratios to the first.
	Floor     *systemResult   `json:"floor,omitempty"`
	Interlock *systemResult   `json:"interlock,omitempty"`
	Ratio     *ratio          `json:"ratio,omitempty"`
	Legs      []legResult     `json:"legs,omitempty"`
	Systems   []systemFigures `json:"systems,omitempty"`
	// WorkerProcs are the throughput measurements with the workers in
	// child processes, one per count of --worker-procs.
	WorkerProcs []*comparison   `json:"workerProcs,omitempty"`
	Paused      *pausedResult   `json:"paused,omitempty"`
	Finished    *finishedResult `json:"finished,omitempty"`
	// Writes is the write count per phase (--count-writes).
	Writes *writesResult `json:"writes,omitempty"`
}

// systemResult is one system's throughput measurement.
type systemResult struct {
	Runs int `json:"runs"`
	// Server is where the server ran: "process" (a child process) or
	// "inprocess".
	Server             string  `json:"server"`
	Seconds            float64 `json:"seconds"`
	RunsPerSec         float64 `json:"runsPerSec"`
	StartToInterrupted latency `json:"startToInterrupted"`
	ResumeToCompleted  latency `json:"resumeToCompleted"`
	Memory             memPeak `json:"memory"`
	// CPUMsPerRun is this process's CPU time (user and system, from
	// getrusage) over the measured runs, divided by the runs, in ms. With
	// the server in a child process it is the worker's and the clients'
	// CPU alone; with the server in this process it includes the server's.
	CPUMsPerRun float64 `json:"cpuMsPerRun"`
	// ServerCPUMsPerRun is the server child's CPU time over the same runs
	// (utime and stime of /proc/<pid>/stat, 10 ms units), summed over the
	// nodes of a cluster, divided by the runs, in ms; 0 when the server
	// runs in this process.
	ServerCPUMsPerRun float64 `json:"serverCPUMsPerRun,omitempty"`
	// WorkersCPUMsPerRun is the worker processes' CPU time over the same
	// runs, read as the server's and summed, divided by the runs, in ms; 0
	// when the workers run in this process.
	WorkersCPUMsPerRun float64 `json:"workersCPUMsPerRun,omitempty"`
	// CheckpointBytes are the sizes of a waiting checkpoint (of a run
	// started after the measurement and left waiting) and of the first
	// run's completed one.
	CheckpointBytes []int `json:"checkpointBytes,omitempty"`
	// startSamples and resumeSamples are the latencies of every measured
	// run, so that two legs combine.
	startSamples, resumeSamples []time.Duration
}

// latency summarises the latencies of one half of a run.
type latency struct {
	P50Ms float64 `json:"p50ms"`
	P99Ms float64 `json:"p99ms"`
	MaxMs float64 `json:"maxms"`
}

// ratio is a system's figures divided by the first system's (by default
// Interlock's by the floor's).
type ratio struct {
	RunsPerSec            float64 `json:"runsPerSec"`
	CPUPerRun             float64 `json:"cpuPerRun"`
	P99StartToInterrupted float64 `json:"p99StartToInterrupted"`
	P99ResumeToCompleted  float64 `json:"p99ResumeToCompleted"`
}

// memPeak is the peak memory during a measurement.
type memPeak struct {
	// PeakHeapInuseMB is the highest Go heap in use (HeapInuse) sampled.
	PeakHeapInuseMB float64 `json:"peakHeapInuseMB"`
	// PeakSysMB is the highest Go memory from the OS (Sys) sampled.
	PeakSysMB float64 `json:"peakSysMB"`
	// PeakRSSMB is the highest resident set sampled during the measurement.
	PeakRSSMB float64 `json:"peakRSSMB"`
	// MaxRSSMB is ru_maxrss at the end: the process's peak so far, earlier
	// measurements included.
	MaxRSSMB float64 `json:"maxRSSMB"`
	// ServerPeakRSSMB is the highest resident set (VmRSS) of the server's
	// child process sampled; 0 when the server runs in this process.
	ServerPeakRSSMB float64 `json:"serverPeakRSSMB,omitempty"`
	// ServerHWMMB is the child's VmHWM at the end: its peak resident set
	// so far as Linux records it, which it updates lazily, so it can be a
	// little below ServerPeakRSSMB.
	ServerHWMMB float64 `json:"serverHWMMB,omitempty"`
	// WorkersPeakRSSMB is the highest sum of the resident sets of the
	// worker processes sampled; 0 when the workers run in this process.
	WorkersPeakRSSMB float64 `json:"workersPeakRSSMB,omitempty"`
}

// pausedResult is the memory flatness measurement.
type pausedResult struct {
	Runs int `json:"runs"`
	// Server is where the server ran: "process" (a child process) or
	// "inprocess".
	Server string `json:"server"`
	// Seconds is the time spent starting the runs, readings excluded.
	Seconds float64 `json:"seconds"`
	// Points are readings before any run is paused and after each quarter.
	Points []pausedPoint `json:"points"`
	// Idle is the reading after IdleSeconds more without traffic.
	Idle        memPoint `json:"idle"`
	IdleSeconds float64  `json:"idleSeconds"`
	// HeapBytesPerRun and RSSBytesPerRun are the growth of the Go heap and
	// of the resident set (after FreeOSMemory) from the first quarter to
	// the last, per paused run.
	HeapBytesPerRun float64 `json:"heapBytesPerRun"`
	RSSBytesPerRun  float64 `json:"rssBytesPerRun"`
	// ServerRSSBytesPerRun is the growth of the server child's resident
	// set over the same runs; 0 when the server runs in this process.
	ServerRSSBytesPerRun float64 `json:"serverRSSBytesPerRun,omitempty"`
	// PendingInKV is the number of keys in the pending bucket at the end.
	PendingInKV int `json:"pendingInKV"`
	// Detail is what the measurement read besides memory (paused.go).
	Detail *pausedDetail `json:"detail,omitempty"`
}

// pausedPoint is a memory reading with Paused runs waiting.
type pausedPoint struct {
	Paused int      `json:"paused"`
	Memory memPoint `json:"memory"`
}

// memPoint is memory at one moment, after a garbage collection.
type memPoint struct {
	HeapInuseMB float64 `json:"heapInuseMB"`
	RSSMB       float64 `json:"rssMB"`
	// RSSFreedMB is the resident set once freed memory went back to the OS.
	RSSFreedMB float64 `json:"rssFreedMB"`
	// MaxRSSMB is this process's ru_maxrss: its peak resident set so far.
	MaxRSSMB float64 `json:"maxRSSMB"`
	// ServerRSSMB and ServerHWMMB are the server child's resident set
	// (VmRSS) and its peak so far (VmHWM), read without collecting its
	// garbage; 0 when the server runs in this process.
	ServerRSSMB float64 `json:"serverRSSMB,omitempty"`
	ServerHWMMB float64 `json:"serverHWMMB,omitempty"`
}

// latencies returns the nearest-rank percentiles of ds.
func latencies(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return latency{P50Ms: ms(rank(0.50)), P99Ms: ms(rank(0.99)), MaxMs: ms(s[len(s)-1])}
}

func ratios(floor, il *systemResult) *ratio {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return &ratio{
		RunsPerSec:            div(il.RunsPerSec, floor.RunsPerSec),
		CPUPerRun:             div(il.CPUMsPerRun+il.WorkersCPUMsPerRun, floor.CPUMsPerRun+floor.WorkersCPUMsPerRun),
		P99StartToInterrupted: div(il.StartToInterrupted.P99Ms, floor.StartToInterrupted.P99Ms),
		P99ResumeToCompleted:  div(il.ResumeToCompleted.P99Ms, floor.ResumeToCompleted.P99Ms),
	}
}

func machineFacts() machine {
	m := machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format(time.RFC3339),
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.LoadAvgStart = loadAvg()
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		n, _ := strconv.Atoi(strings.Fields(kb)[0])
		m.MemoryMB = n / 1024
	}
	return m
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "name: value" line of a /proc
// file, or "".
func procField(path, name string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func modeTitle(workload, fsync string) string {
	f := "fsync before ack (fsync=always)"
	if fsync == "lazy" {
		f = "lazy fsync (fsync=lazy)"
	}
	return workload + " workload, " + f
}

// writeText writes the report as tables for a person.
func (r report) writeText(w io.Writer) error {
	b := &bytes.Buffer{}
	m := r.Machine
	fmt.Fprintf(b, "machine: %d CPUs (GOMAXPROCS %d), %s, %d MB, %s %s, %s\n",
		m.CPUs, m.GOMAXPROCS, m.CPUModel, m.MemoryMB, m.GoVersion, m.OS, m.Date)
	fmt.Fprintf(b, "load average: %s at start, %s at end (the machine may be shared)\n", m.LoadAvgStart, m.LoadAvgEnd)
	systems := r.Systems
	if len(systems) == 0 {
		systems = options{client: r.Client}.systemList()
	}
	if r.Runs > 0 {
		labels := systemLabels(systems)
		back := slices.Clone(labels)
		slices.Reverse(back)
		fmt.Fprintf(b, "runs: %d per system in two legs, in the order %s; %d client goroutines, %d worker slots per worker, %d warm-up runs before each leg\n", r.Runs, strings.Join(slices.Concat(labels, back), ", "), r.Concurrency, r.Workers, r.Warmup)
	}
	fmt.Fprintf(b, "server: %s", r.Server)
	if r.ClusterNodes > 1 {
		fmt.Fprintf(b, ", a %d-node cluster", r.ClusterNodes)
	}
	fmt.Fprintf(b, ", %d replicas", r.Replicas)
	if len(r.WorkerProcs) > 0 {
		fmt.Fprintf(b, "; workers in %s child processes", procsList(r.WorkerProcs))
	}
	if r.StoredRuns > 0 {
		fmt.Fprintf(b, "; %d runs stored before each leg", r.StoredRuns)
	}
	fmt.Fprintln(b)
	for _, n := range r.Notes {
		fmt.Fprintf(b, "memory and CPU: %s\n", n)
	}
	for _, mr := range r.Modes {
		fmt.Fprintf(b, "\n%s\n", modeTitle(mr.Workload, mr.Fsync))
		if len(mr.Systems) > 0 {
			child := mr.Floor.Server == serverProcess
			tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
			head := "system\truns/s\tCPU ms/run\tstart->interrupted p50\tp99\tresume->completed p50\tp99\tpeak heap MB\tpeak sys MB\tpeak RSS MB\tmax RSS MB\t"
			if child {
				head += "server peak RSS MB\tserver VmHWM MB\tserver CPU ms/run\t"
			}
			fmt.Fprintln(tw, head+"checkpoint bytes\t")
			for _, s := range mr.Systems {
				x := s.Result
				fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.1f\t%.1f\t%.1f\t%.1f\t",
					s.Label, x.RunsPerSec, x.CPUMsPerRun, x.StartToInterrupted.P50Ms, x.StartToInterrupted.P99Ms,
					x.ResumeToCompleted.P50Ms, x.ResumeToCompleted.P99Ms,
					x.Memory.PeakHeapInuseMB, x.Memory.PeakSysMB, x.Memory.PeakRSSMB, x.Memory.MaxRSSMB)
				if child {
					fmt.Fprintf(tw, "%.1f\t%.1f\t%.3f\t", x.Memory.ServerPeakRSSMB, x.Memory.ServerHWMMB, x.ServerCPUMsPerRun)
				}
				fmt.Fprintf(tw, "%s\t\n", ints(x.CheckpointBytes))
			}
			blanks := strings.Repeat("\t", 6)
			if child {
				blanks += "\t\t\t"
			}
			for _, s := range mr.Systems[1:] {
				fmt.Fprintf(tw, "%s/%s\t%.2fx\t%.2fx\t\t%.2fx\t\t%.2fx%s\n", s.Label, mr.Systems[0].Label, s.Ratio.RunsPerSec, s.Ratio.CPUPerRun, s.Ratio.P99StartToInterrupted, s.Ratio.P99ResumeToCompleted, blanks)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if err := writeComparisons(b, mr); err != nil {
			return err
		}
		if p := mr.Paused; p != nil {
			fmt.Fprintf(b, "paused runs: %d started and left waiting in %.1f s (%.0f/s); the pending bucket holds %d keys\n", p.Runs, p.Seconds, float64(p.Runs)/p.Seconds, p.PendingInKV)
			child := p.Server == serverProcess
			if child {
				fmt.Fprintln(b, "this process (worker and clients) and, apart, the server's child process")
			} else {
				fmt.Fprintln(b, "this process, server included")
			}
			tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
			head := "paused runs\tGo heap in use MB\tRSS MB\tRSS after FreeOSMemory MB\tmax RSS MB\t"
			if child {
				head += "server RSS MB\tserver VmHWM MB\t"
			}
			fmt.Fprintln(tw, head)
			row := func(label string, m memPoint) {
				fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t", label, m.HeapInuseMB, m.RSSMB, m.RSSFreedMB, m.MaxRSSMB)
				if child {
					fmt.Fprintf(tw, "%.1f\t%.1f\t", m.ServerRSSMB, m.ServerHWMMB)
				}
				fmt.Fprintln(tw)
			}
			for _, pt := range p.Points {
				row(strconv.Itoa(pt.Paused), pt.Memory)
			}
			row(fmt.Sprintf("%d, %.0f s idle", p.Runs, p.IdleSeconds), p.Idle)
			fmt.Fprintf(tw, "per paused run (quarter 1 to 4)\t%.0f B\t\t%.0f B\t\t", p.HeapBytesPerRun, p.RSSBytesPerRun)
			if child {
				fmt.Fprintf(tw, "%.0f B\t\t", p.ServerRSSBytesPerRun)
			}
			fmt.Fprintln(tw)
			if err := tw.Flush(); err != nil {
				return err
			}
			if err := p.Detail.writeText(b, p.Runs, child); err != nil {
				return err
			}
		}
		if f := mr.Finished; f != nil {
			fmt.Fprintf(b, "finished runs: %d run to completion, kept %.0f s; the server's %s\n", f.Runs, f.KeepFinishedSeconds, map[bool]string{true: "child process", false: "memory is this whole process"}[f.Server == serverProcess])
			tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "when\truns bucket msgs\truns bucket MB\truns bucket dir MB\tdata dir MB\tserver RSS MB\tserver VmHWM MB\t")
			for _, p := range f.Points {
				fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", p.Label, p.RunsMsgs, float64(p.RunsBytes)/mb, float64(p.RunsDiskBytes)/mb, float64(p.DiskBytes)/mb, p.Memory.ServerRSSMB, p.Memory.ServerHWMMB)
			}
			per := func(a, b float64) float64 { return (b - a) / float64(f.Runs) }
			fmt.Fprintf(tw, "per finished run kept\t\t%.0f B\t%.0f B\t%.0f B\t%.0f B\t\t\n",
				per(float64(f.Before.RunsBytes), float64(f.Kept.RunsBytes)), per(float64(f.Before.RunsDiskBytes), float64(f.Kept.RunsDiskBytes)), per(float64(f.Before.DiskBytes), float64(f.Kept.DiskBytes)),
				per(f.Before.Memory.ServerRSSMB*mb, f.Kept.Memory.ServerRSSMB*mb))
			fmt.Fprintf(tw, "per finished run once expired\t\t%.0f B\t%.0f B\t%.0f B\t%.0f B\t\t\n",
				per(float64(f.Before.RunsBytes), float64(f.Expired.RunsBytes)), per(float64(f.Before.RunsDiskBytes), float64(f.Expired.RunsDiskBytes)), per(float64(f.Before.DiskBytes), float64(f.Expired.DiskBytes)),
				per(f.Before.Memory.ServerRSSMB*mb, f.Expired.Memory.ServerRSSMB*mb))
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if err := mr.Writes.writeText(b); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, "/")
}
