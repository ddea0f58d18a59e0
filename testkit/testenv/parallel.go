package testenv

import (
	"flag"
	"runtime"
	"strconv"
)

// ParallelPerCPU, called from TestMain before m.Run, lets perCPU parallel
// tests run at once per CPU unless -parallel was given. For packages whose
// tests mostly wait (on timers, child processes, a fake server): go test's
// default of one per CPU leaves the CPUs idle while they wait.
func ParallelPerCPU(perCPU int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
	}
}
