package graph

import "slices"

// RunEventLeaves lists the RunEvent fields a shared rendering may select.
func RunEventLeaves() []string {
	var out []string
	for name := range runEventLeaves {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
