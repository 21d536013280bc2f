// Package canonical hashes the content of events canonically: ArgsKey, the
// per-process 64-bit key that stall detection compares tool calls' args
// by (canonically equal JSON documents share it), and the stored content
// hashes of a log recorded without content (ArgsHash, TextHash, ResultHash,
// contract §1). Package termination (stall detection) and package codec
// (the decoder hashes args while it reads them, and publishes the content
// hashes) both use it; it imports only internal/jsonscan.
package canonical
