// Package codec reads and writes agentstop's file formats (contract §1,
// §2): the JSON Lines event log (Decoder, DecodeEvent, with their
// DecodeErrors naming the line), the end and raise records of a recorded
// log (Record, Entry), the JSON form of causes with its "$kind" registry
// (MarshalCause, UnmarshalCause, RegisterCause), the content hashes of a
// log recorded without content (ArgsHash, TextHash, ResultHash), and the
// first pass over a log of many runs that finds where each run ends
// (IndexRuns).
//
// It owns the bytes; package termination owns what they mean (Event,
// Cause, Result), and package replay evaluates what codec reads. codec
// imports termination and the module's internal lexer and hashing
// (internal/jsonscan, internal/canonical, internal/causejson), nothing
// else of the module.
//
// A Decoder reads a log one line at a time, never further ahead than one
// buffer: a hand-written fast path decodes the well-formed lines without
// reflection, and every line it is not certain about goes through
// encoding/json, which defines the behaviour (errors included).
package codec
