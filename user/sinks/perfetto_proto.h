/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Perfetto trace format's field numbers that tokenscope writes, in one place. Source:
 * Perfetto's public protos (github.com/google/perfetto, protos/perfetto/trace/):
 * trace.proto, trace_packet.proto, clock_snapshot.proto, common/builtin_clock.proto,
 * track_event/track_event.proto, track_descriptor.proto, process_descriptor.proto,
 * counter_descriptor.proto, debug_annotation.proto. Field numbers are stable by the protos'
 * contract. tests/perfetto/trace_subset.proto repeats them for protoc --decode.
 */
#ifndef TS_PERFETTO_PROTO_H
#define TS_PERFETTO_PROTO_H

/* Trace */
#define PF_TRACE_PACKET 1 /* repeated TracePacket packet */

/* TracePacket */
#define PF_PACKET_CLOCK_SNAPSHOT 6
#define PF_PACKET_TIMESTAMP 8		   /* uint64 */
#define PF_PACKET_SEQUENCE_ID 10	   /* trusted_packet_sequence_id, uint32 */
#define PF_PACKET_TRACK_EVENT 11
#define PF_PACKET_SEQUENCE_FLAGS 13	   /* uint32 */
#define PF_PACKET_TIMESTAMP_CLOCK_ID 58	   /* uint32 */
#define PF_PACKET_TRACK_DESCRIPTOR 60
#define PF_SEQ_INCREMENTAL_STATE_CLEARED 1 /* SequenceFlags */

/* ClockSnapshot, Clock; BuiltinClock */
#define PF_CLOCKS 1		  /* repeated Clock clocks */
#define PF_PRIMARY_TRACE_CLOCK 2
#define PF_CLOCK_ID 1
#define PF_CLOCK_TIMESTAMP 2
#define PF_BUILTIN_CLOCK_MONOTONIC 3 /* CLOCK_MONOTONIC: bpf_ktime_get_ns, tokenscope's clock */

/* TrackDescriptor; ProcessDescriptor */
#define PF_TRACK_UUID 1
#define PF_TRACK_NAME 2
#define PF_TRACK_PROCESS 3
#define PF_TRACK_PARENT_UUID 5
#define PF_TRACK_COUNTER 8 /* CounterDescriptor: present makes a counter track */
#define PF_PROCESS_PID 1
#define PF_PROCESS_NAME 6

/* TrackEvent; TrackEvent.Type */
#define PF_EVENT_DEBUG_ANNOTATIONS 4
#define PF_EVENT_TYPE 9
#define PF_EVENT_TRACK_UUID 11
#define PF_EVENT_NAME 23
#define PF_EVENT_COUNTER_VALUE 30	   /* int64 */
#define PF_EVENT_DOUBLE_COUNTER_VALUE 44
#define PF_EVENT_FLOW_IDS 47		   /* repeated fixed64 */
#define PF_EVENT_TERMINATING_FLOW_IDS 48 /* repeated fixed64 */
#define PF_TYPE_SLICE_BEGIN 1
#define PF_TYPE_SLICE_END 2
#define PF_TYPE_INSTANT 3
#define PF_TYPE_COUNTER 4

/* DebugAnnotation */
#define PF_ANNOTATION_BOOL 2
#define PF_ANNOTATION_UINT 3
#define PF_ANNOTATION_INT 4
#define PF_ANNOTATION_DOUBLE 5
#define PF_ANNOTATION_STRING 6
#define PF_ANNOTATION_NAME 10

#endif
