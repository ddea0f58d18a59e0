package dispatch

// Environment variables that connect the sandbox's parts. The backend sets
// EnvWorkOrder on the sandbox container; the init process (PID 1) passes it
// and EnvServicesFile on to the runner.
const (
	// EnvWorkOrder is the path of the work order JSON inside the sandbox.
	EnvWorkOrder = "SANDBOX_WORK_ORDER"
	// EnvServicesFile is the path of the JSON map of service name to
	// address that the init process writes once services are healthy; the
	// runner resolves {name} placeholders from it.
	EnvServicesFile = "SANDBOX_SERVICES_FILE"
)

// Services is the content of the services file: placeholder name to
// host:port reachable from the runner.
type Services map[string]string
