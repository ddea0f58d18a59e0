package nomad

import (
	"strconv"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// SetupCache is the setup cache on Nomad: a host volume the client
// configuration names (deploy/nomad/client.hcl), mounted whole into every
// coding sandbox at dispatch.SetupCacheNodeMount. The sandbox's init bounds
// it, binds the run's repository's directory of it in place and unmounts
// the rest before the runner starts. A run placed on a node without the
// volume's entries costs only the setup it would have run anyway.
type SetupCache struct {
	// Volume is the host volume's name; empty, jobs carry no volume.
	Volume string
	// MaxBytes bounds one repository's entries, NodeMaxBytes all of them
	// on a node; 0 is no bound.
	MaxBytes, NodeMaxBytes int64
}

// setupCacheVolumeName is the volume's name inside the job.
const setupCacheVolumeName = "setup-cache"

// addSetupCache gives a coding sandbox's group and task the volume.
func addSetupCache(sc SetupCache, group *api.TaskGroup, task *api.Task) {
	if sc.Volume == "" {
		return
	}
	if group.Volumes == nil {
		group.Volumes = map[string]*api.VolumeRequest{}
	}
	group.Volumes[setupCacheVolumeName] = &api.VolumeRequest{Name: setupCacheVolumeName, Type: "host", Source: sc.Volume, ReadOnly: false}
	task.VolumeMounts = append(task.VolumeMounts, &api.VolumeMount{
		Volume: ptr(setupCacheVolumeName), Destination: ptr(dispatch.SetupCacheNodeMount), ReadOnly: ptr(false),
	})
	if sc.MaxBytes > 0 {
		task.Env[dispatch.EnvSetupCacheMaxSize] = strconv.FormatInt(sc.MaxBytes, 10)
	}
	if sc.NodeMaxBytes > 0 {
		task.Env[dispatch.EnvSetupCacheNodeMaxSize] = strconv.FormatInt(sc.NodeMaxBytes, 10)
	}
}

// osvVolumeName is the OSV database's volume inside the job.
const osvVolumeName = "osv"

// addOSV gives a coding sandbox the operator's OSV database, read-only.
func addOSV(volume string, group *api.TaskGroup, task *api.Task) {
	if volume == "" {
		return
	}
	if group.Volumes == nil {
		group.Volumes = map[string]*api.VolumeRequest{}
	}
	group.Volumes[osvVolumeName] = &api.VolumeRequest{Name: osvVolumeName, Type: "host", Source: volume, ReadOnly: true}
	task.VolumeMounts = append(task.VolumeMounts, &api.VolumeMount{
		Volume: ptr(osvVolumeName), Destination: ptr(dispatch.OSVMount), ReadOnly: ptr(true),
	})
}
