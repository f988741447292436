package kafkatest

// KIP1243RequireHook lets tests name a hook the agent cannot find.
var KIP1243RequireHook = kip1243RequireHook
