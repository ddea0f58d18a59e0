package handlers

import (
	"fmt"
	"strings"
)

// check names the settings left unset. The server configuration
// (app.Config) owns every default and hands NewBase defaulted values, so an
// unset one is a wiring defect: found here at start, not as a zero interval
// or an empty label on an issue.
func (s Settings) check() error {
	var unset []string
	for _, f := range []struct {
		name  string
		unset bool
	}{
		{"TriggerLabel", s.TriggerLabel == ""},
		{"MaxContinues", s.MaxContinues <= 0},
		{"MaxPlanRounds", s.MaxPlanRounds <= 0},
		{"ProgressInterval", s.ProgressInterval <= 0},
		{"TokenRefresh", s.TokenRefresh <= 0},
		{"DispatchDeadline", s.DispatchDeadline <= 0},
		{"ReviewBatchWindow", s.ReviewBatchWindow <= 0},
		{"ResultRetry", s.ResultRetry <= 0},
		{"PreviewDuration", s.PreviewDuration <= 0},
		{"CheckName", s.CheckName == ""},
		{"WebURL", s.WebURL == ""},
		{"Isolation", s.Isolation == ""},
		{"Limits.MaxBudgetUSD", s.Limits.MaxBudgetUSD <= 0},
		{"Limits.MaxTimeoutMinutes", s.Limits.MaxTimeoutMinutes <= 0},
		{"Limits.MaxMemoryMB", s.Limits.MaxMemoryMB <= 0},
		{"Limits.MaxCPU", s.Limits.MaxCPU <= 0},
		{"Limits.PidsLimit", s.Limits.PidsLimit <= 0},
		{"ArtifactCaps", s.ArtifactCaps.Validate() != nil},
		{"CILogBytes", s.CILogBytes <= 0},
		{"Images", s.Images.MaxCount > 0 && (s.Images.MaxBytes <= 0 || s.Images.MaxTotal <= 0)},
	} {
		if f.unset {
			unset = append(unset, f.name)
		}
	}
	if len(unset) > 0 {
		return fmt.Errorf("handler settings without a value: %s (the server configuration sets their defaults)", strings.Join(unset, ", "))
	}
	return nil
}
