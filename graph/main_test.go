package graph_test

import (
	"testing"

	"github.com/agentry/agentry/internal/app/apptest"
)

// TestMain removes the agentry binary the worker-process tests build once the package's tests
// end.
func TestMain(m *testing.M) { apptest.Main(m) }
