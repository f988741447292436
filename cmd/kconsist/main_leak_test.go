package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every run closes what it opened: clients, factories, their goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
