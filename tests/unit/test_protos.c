/* Checks that our .proto subset is wire-compatible with Perfetto v58.2:
 * it decodes a trace written by real Perfetto, it encodes IPC frames to the
 * bytes the service expects, and the ProducerPort method table has the ids
 * the service assigns. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protos/perfetto/common/descriptor.pb-c.h"
#include "protos/perfetto/ipc/producer_port.pb-c.h"
#include "protos/perfetto/ipc/wire_protocol.pb-c.h"
#include "protos/perfetto/trace/trace.pb-c.h"
#include "util/util.h"

#define SAMPLE_REL "/../shared/data/perfetto-v58.2-traced_probes-sample.pftrace"
#define SAMPLE_MAX (64u << 20)

/* Figures of the reference trace (see shared/data/README.md). */
#define SAMPLE_PACKETS 53
#define SAMPLE_BUNDLES 30
#define SAMPLE_EVENTS 35015
#define SAMPLE_END_READ_EVENTS 34989
#define DYN_FIELD_IPI_SEND_CPU 65536
#define DYN_FIELD_SCHED_STAT_RUNTIME 65537

static char *sample_buf;
static size_t sample_len;
static Perfetto__Protos__Trace *sample;

static int sample_load(void) {
        _cleanup_free_ char *path = NULL;
        const char *root = getenv("TP_SOURCE_ROOT");
        int r;

        if (!root)
                return -ENOENT;
        if (asprintf(&path, "%s%s", root, SAMPLE_REL) < 0)
                return -ENOMEM;
        r = read_full_file_at(AT_FDCWD, path, SAMPLE_MAX, &sample_buf, &sample_len);
        if (r < 0)
                return r;
        sample = perfetto__protos__trace__unpack(NULL, sample_len, (const uint8_t *) sample_buf);
        return sample ? 0 : -EBADMSG;
}

static void sample_free(void) {
        if (sample)
                perfetto__protos__trace__free_unpacked(sample, NULL);
        free(sample_buf);
}

static bool has_unknown_field(const ProtobufCMessage *m, uint32_t tag) {
        for (size_t i = 0; i < m->n_unknown_fields; i++)
                if (m->unknown_fields[i].tag == tag)
                        return true;
        return false;
}

START_TEST(test_sample_packets) {
        const Perfetto__Protos__TraceConfig *config = NULL;
        const Perfetto__Protos__TraceUuid *uuid = NULL;
        size_t bundles = 0, trees = 0, threads = 0, configs = 0, uuids = 0;

        ck_assert_ptr_nonnull(sample);
        ck_assert_uint_eq(sample->n_packet, SAMPLE_PACKETS);
        for (size_t i = 0; i < sample->n_packet; i++) {
                const Perfetto__Protos__TracePacket *p = sample->packet[i];

                /* The service stamps every packet it hands out. */
                ck_assert_int_eq(p->optional_trusted_packet_sequence_id_case,
                                 PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
                ck_assert_uint_gt(p->trusted_packet_sequence_id, 0);

                switch (p->data_case) {
                case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
                        bundles++;
                        /* Bundles carry no packet timestamp. */
                        ck_assert(!p->has_timestamp);
                        ck_assert(p->ftrace_events->has_cpu);
                        ck_assert_uint_lt(p->ftrace_events->cpu, 2);
                        ck_assert(p->ftrace_events->has_previous_bundle_end_timestamp);
                        break;
                case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
                        trees++;
                        ck_assert(p->has_timestamp);
                        threads += p->process_tree->n_threads;
                        for (size_t j = 0; j < p->process_tree->n_processes; j++)
                                ck_assert_int_ge(p->process_tree->processes[j]->pid, 0);
                        /* v58 names each thread's process, main thread included. */
                        for (size_t j = 0; j < p->process_tree->n_threads; j++)
                                ck_assert(p->process_tree->threads[j]->has_tgid);
                        break;
                case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG: {
                        const Perfetto__Protos__TraceConfig *c = p->trace_config;

                        configs++;
                        config = c;
                        ck_assert_uint_eq(c->duration_ms, 1000);
                        ck_assert_uint_eq(c->n_buffers, 2);
                        ck_assert_int_eq(c->buffers[0]->fill_policy,
                                         PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
                        ck_assert_uint_eq(c->n_data_sources, 2);
                        ck_assert_str_eq(c->data_sources[0]->config->name, "linux.ftrace");
                        ck_assert_uint_eq(c->data_sources[0]->config->ftrace_config->n_ftrace_events, 10);
                        ck_assert_str_eq(c->data_sources[1]->config->name, "linux.process_stats");
                        ck_assert(c->data_sources[1]->config->process_stats_config->scan_all_processes_on_start);
                        break;
                }
                case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID:
                        uuids++;
                        uuid = p->trace_uuid;
                        ck_assert(uuid->has_msb && uuid->has_lsb);
                        break;
                default:
                        break;
                }
        }
        ck_assert_uint_eq(bundles, SAMPLE_BUNDLES);
        ck_assert_uint_eq(uuids, 1);
        /* The service also echoes the id in the config's deprecated fields. */
        ck_assert_int_eq(config->trace_uuid_msb, uuid->msb);
        ck_assert_int_eq(config->trace_uuid_lsb, uuid->lsb);
        ck_assert_uint_ge(trees, 1);
        ck_assert_uint_gt(threads, 0);
        ck_assert_uint_eq(configs, 1);
}
END_TEST

START_TEST(test_sample_event_count) {
        size_t events = 0, compact = 0, dynamic = 0, typed = 0;

        ck_assert_ptr_nonnull(sample);
        for (size_t i = 0; i < sample->n_packet; i++) {
                const Perfetto__Protos__FtraceEventBundle *b = sample->packet[i]->ftrace_events;
                const Perfetto__Protos__FtraceEventBundle__CompactSched *cs;

                if (sample->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                        continue;
                cs = b->compact_sched;
                if (cs) {
                        compact++;
                        /* The compact arrays are parallel. */
                        ck_assert_uint_eq(cs->n_switch_prev_state, cs->n_switch_timestamp);
                        ck_assert_uint_eq(cs->n_switch_next_pid, cs->n_switch_timestamp);
                        ck_assert_uint_eq(cs->n_switch_next_prio, cs->n_switch_timestamp);
                        ck_assert_uint_eq(cs->n_switch_next_comm_index, cs->n_switch_timestamp);
                        ck_assert_uint_eq(cs->n_waking_pid, cs->n_waking_timestamp);
                        ck_assert_uint_eq(cs->n_waking_target_cpu, cs->n_waking_timestamp);
                        ck_assert_uint_eq(cs->n_waking_prio, cs->n_waking_timestamp);
                        ck_assert_uint_eq(cs->n_waking_comm_index, cs->n_waking_timestamp);
                        ck_assert_uint_eq(cs->n_waking_common_flags, cs->n_waking_timestamp);
                        for (size_t j = 0; j < cs->n_switch_next_comm_index; j++)
                                ck_assert_uint_lt(cs->switch_next_comm_index[j], cs->n_intern_table);
                        for (size_t j = 0; j < cs->n_waking_comm_index; j++)
                                ck_assert_uint_lt(cs->waking_comm_index[j], cs->n_intern_table);
                        events += cs->n_switch_timestamp + cs->n_waking_timestamp;
                }
                for (size_t j = 0; j < b->n_event; j++) {
                        const Perfetto__Protos__FtraceEvent *e = b->event[j];

                        ck_assert(e->has_timestamp);
                        ck_assert(e->has_pid);
                        if (e->event_case != PERFETTO__PROTOS__FTRACE_EVENT__EVENT__NOT_SET)
                                typed++;
                        else if (has_unknown_field(&e->base, DYN_FIELD_IPI_SEND_CPU) ||
                                 has_unknown_field(&e->base, DYN_FIELD_SCHED_STAT_RUNTIME))
                                dynamic++;
                }
                events += b->n_event;
        }
        ck_assert_uint_gt(compact, 0);
        ck_assert_uint_gt(typed, 0);
        ck_assert_uint_gt(dynamic, 0);
        /* Every non-compact event is either one we know or a dynamic one. */
        ck_assert_uint_eq(events, SAMPLE_EVENTS);
}
END_TEST

START_TEST(test_sample_typed_events) {
        size_t forks = 0, newtasks = 0, hrtimers = 0;

        ck_assert_ptr_nonnull(sample);
        for (size_t i = 0; i < sample->n_packet; i++) {
                const Perfetto__Protos__FtraceEventBundle *b = sample->packet[i]->ftrace_events;

                if (sample->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                        continue;
                for (size_t j = 0; j < b->n_event; j++) {
                        const Perfetto__Protos__FtraceEvent *e = b->event[j];

                        switch (e->event_case) {
                        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK:
                                forks++;
                                ck_assert_int_gt(e->sched_process_fork->child_pid, 0);
                                ck_assert_ptr_nonnull(e->sched_process_fork->parent_comm);
                                break;
                        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_NEWTASK:
                                newtasks++;
                                ck_assert(e->task_newtask->has_clone_flags);
                                break;
                        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_HRTIMER_EXPIRE_ENTRY:
                                hrtimers++;
                                break;
                        default:
                                break;
                        }
                }
        }
        ck_assert_uint_gt(forks, 0);
        ck_assert_uint_eq(forks, newtasks);
        ck_assert_uint_gt(hrtimers, 0);
}
END_TEST

START_TEST(test_sample_generic_descriptors) {
        bool seen_ipi = false, seen_runtime = false;

        ck_assert_ptr_nonnull(sample);
        for (size_t i = 0; i < sample->n_packet; i++) {
                const Perfetto__Protos__FtraceEventBundle *b = sample->packet[i]->ftrace_events;

                if (sample->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                        continue;
                for (size_t j = 0; j < b->n_generic_event_descriptors; j++) {
                        const Perfetto__Protos__FtraceEventBundle__GenericEventDescriptor *g =
                                b->generic_event_descriptors[j];
                        Perfetto__Protos__DescriptorProto *d;

                        ck_assert(g->has_event_descriptor);
                        d = perfetto__protos__descriptor_proto__unpack(NULL, g->event_descriptor.len,
                                                                       g->event_descriptor.data);
                        ck_assert_ptr_nonnull(d);
                        ck_assert_uint_ge(d->n_field, 1);
                        for (size_t k = 0; k < d->n_field; k++) {
                                /* Fields are numbered 1..N in format order. */
                                ck_assert_int_eq(d->field[k]->number, (int32_t) k + 1);
                                ck_assert_ptr_nonnull(d->field[k]->name);
                                ck_assert(d->field[k]->has_type);
                        }
                        if (g->field_id == DYN_FIELD_IPI_SEND_CPU) {
                                seen_ipi = true;
                                ck_assert_str_eq(d->name, "ipi_send_cpu");
                                ck_assert_str_eq(g->group_name, "ipi");
                                ck_assert_str_eq(d->field[0]->name, "cpu");
                        } else if (g->field_id == DYN_FIELD_SCHED_STAT_RUNTIME) {
                                seen_runtime = true;
                                ck_assert_str_eq(d->name, "sched_stat_runtime");
                                ck_assert_str_eq(g->group_name, "sched");
                                ck_assert_str_eq(d->field[0]->name, "comm");
                                ck_assert_int_eq(d->field[0]->type,
                                                 PERFETTO__PROTOS__FIELD_DESCRIPTOR_PROTO__TYPE__TYPE_STRING);
                        } else {
                                ck_abort_msg("unexpected dynamic field id %d", g->field_id);
                        }
                        perfetto__protos__descriptor_proto__free_unpacked(d, NULL);
                }
        }
        ck_assert(seen_ipi);
        ck_assert(seen_runtime);
}
END_TEST

START_TEST(test_sample_ftrace_stats) {
        const Perfetto__Protos__FtraceStats *start = NULL, *end = NULL;
        uint64_t read_events = 0, overrun = 0;

        ck_assert_ptr_nonnull(sample);
        for (size_t i = 0; i < sample->n_packet; i++) {
                const Perfetto__Protos__FtraceStats *s = sample->packet[i]->ftrace_stats;

                if (sample->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS)
                        continue;
                if (s->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE)
                        start = s;
                else if (s->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE)
                        end = s;
        }
        ck_assert_ptr_nonnull(start);
        ck_assert_ptr_nonnull(end);
        ck_assert_uint_eq(end->n_cpu_stats, 2);
        for (size_t i = 0; i < end->n_cpu_stats; i++) {
                ck_assert_uint_eq(end->cpu_stats[i]->cpu, i);
                read_events += end->cpu_stats[i]->read_events;
                overrun += end->cpu_stats[i]->overrun;
        }
        ck_assert_uint_eq(read_events, SAMPLE_END_READ_EVENTS);
        ck_assert_uint_eq(overrun, 0);
}
END_TEST

/* Dynamic events are unknown fields to us: they must survive a repack, as
 * the recorder re-emits packets it did not write itself. */
START_TEST(test_sample_repack_keeps_unknown_fields) {
        _cleanup_free_ uint8_t *buf = NULL;
        Perfetto__Protos__Trace *again;
        size_t len, n = 0;

        ck_assert_ptr_nonnull(sample);
        len = perfetto__protos__trace__get_packed_size(sample);
        buf = malloc(len);
        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(perfetto__protos__trace__pack(sample, buf), len);
        again = perfetto__protos__trace__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(again);
        ck_assert_uint_eq(again->n_packet, sample->n_packet);
        for (size_t i = 0; i < again->n_packet; i++) {
                const Perfetto__Protos__FtraceEventBundle *b = again->packet[i]->ftrace_events;

                if (again->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
                        continue;
                for (size_t j = 0; j < b->n_event; j++)
                        n += has_unknown_field(&b->event[j]->base, DYN_FIELD_SCHED_STAT_RUNTIME);
        }
        perfetto__protos__trace__free_unpacked(again, NULL);
        ck_assert_uint_gt(n, 0);
}
END_TEST

START_TEST(test_ipc_bind_service_bytes) {
        /* Perfetto's own encoding of BindService("ProducerPort"), request 1. */
        static const uint8_t expected[] = {
                0x10, 0x01, 0x1A, 0x0E, 0x0A, 0x0C, 'P', 'r', 'o', 'd',
                'u', 'c', 'e', 'r', 'P', 'o', 'r', 't',
        };
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
        Perfetto__Protos__IPCFrame__BindService bind = PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
        Perfetto__Protos__IPCFrame *back;
        uint8_t buf[64];
        size_t len;

        bind.service_name = (char *) "ProducerPort";
        frame.has_request_id = true;
        frame.request_id = 1;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
        frame.msg_bind_service = &bind;

        len = perfetto__protos__ipcframe__get_packed_size(&frame);
        ck_assert_uint_eq(len, sizeof(expected));
        ck_assert_uint_eq(perfetto__protos__ipcframe__pack(&frame, buf), len);
        ck_assert_mem_eq(buf, expected, sizeof(expected));

        back = perfetto__protos__ipcframe__unpack(NULL, sizeof(expected), expected);
        ck_assert_ptr_nonnull(back);
        ck_assert_uint_eq(back->request_id, 1);
        ck_assert_int_eq(back->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
        ck_assert_str_eq(back->msg_bind_service->service_name, "ProducerPort");
        perfetto__protos__ipcframe__free_unpacked(back, NULL);
}
END_TEST

START_TEST(test_ipc_invoke_reply_roundtrip) {
        Perfetto__Protos__GetAsyncCommandResponse cmd = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
        Perfetto__Protos__GetAsyncCommandResponse__Flush flush =
                PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;
        Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
        Perfetto__Protos__IPCFrame__InvokeMethodReply reply =
                PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
        Perfetto__Protos__GetAsyncCommandResponse *cmd_back;
        Perfetto__Protos__IPCFrame *back;
        uint64_t ids[] = { 3, 7 };
        uint8_t inner[64], outer[128];
        size_t inner_len, outer_len;

        flush.n_data_source_ids = ARRAY_SIZE(ids);
        flush.data_source_ids = ids;
        flush.has_request_id = true;
        flush.request_id = 42;
        flush.has_flags = true;
        flush.flags = 0x12; /* reason 2 (trace stop), initiator 1 (traced) */
        cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH;
        cmd.flush = &flush;
        inner_len = perfetto__protos__get_async_command_response__pack(&cmd, inner);
        /* Flush is oneof member 5: tag 0x2A. */
        ck_assert_uint_eq(inner[0], 0x2A);

        reply.has_success = reply.has_has_more = reply.has_reply_proto = true;
        reply.success = reply.has_more = true;
        reply.reply_proto.data = inner;
        reply.reply_proto.len = inner_len;
        frame.has_request_id = true;
        frame.request_id = 3;
        frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
        frame.msg_invoke_method_reply = &reply;
        ck_assert_uint_le(perfetto__protos__ipcframe__get_packed_size(&frame), sizeof(outer));
        outer_len = perfetto__protos__ipcframe__pack(&frame, outer);

        back = perfetto__protos__ipcframe__unpack(NULL, outer_len, outer);
        ck_assert_ptr_nonnull(back);
        ck_assert_int_eq(back->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
        ck_assert(back->msg_invoke_method_reply->has_more);
        cmd_back = perfetto__protos__get_async_command_response__unpack(
                NULL, back->msg_invoke_method_reply->reply_proto.len,
                back->msg_invoke_method_reply->reply_proto.data);
        ck_assert_ptr_nonnull(cmd_back);
        ck_assert_int_eq(cmd_back->cmd_case, PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH);
        ck_assert_uint_eq(cmd_back->flush->request_id, 42);
        ck_assert_uint_eq(cmd_back->flush->n_data_source_ids, 2);
        ck_assert_uint_eq(cmd_back->flush->data_source_ids[1], 7);
        perfetto__protos__get_async_command_response__free_unpacked(cmd_back, NULL);
        perfetto__protos__ipcframe__free_unpacked(back, NULL);
}
END_TEST

START_TEST(test_producer_port_methods) {
        /* The service numbers methods from 1 in this order. */
        static const char *const names[] = {
                "InitializeConnection", "RegisterDataSource", "UnregisterDataSource",
                "CommitData", "GetAsyncCommand", "RegisterTraceWriter",
                "UnregisterTraceWriter", "NotifyDataSourceStarted", "NotifyDataSourceStopped",
                "ActivateTriggers", "Sync", "UpdateDataSource",
        };
        const ProtobufCServiceDescriptor *d = &perfetto__protos__producer_port__descriptor;

        ck_assert_str_eq(d->name, "perfetto.protos.ProducerPort");
        ck_assert_str_eq(d->short_name, "ProducerPort");
        ck_assert_uint_eq(d->n_methods, ARRAY_SIZE(names));
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                ck_assert_str_eq(d->methods[i].name, names[i]);
                ck_assert_ptr_eq(protobuf_c_service_descriptor_get_method_by_name(d, names[i]),
                                 &d->methods[i]);
        }
        ck_assert_ptr_eq(d->methods[3].input, &perfetto__protos__commit_data_request__descriptor);
        ck_assert_ptr_eq(d->methods[4].output, &perfetto__protos__get_async_command_response__descriptor);
}
END_TEST

static Suite *protos_suite(bool with_sample) {
        Suite *s = suite_create("protos");
        TCase *tc;

        tc = tcase_create("ipc");
        tcase_add_test(tc, test_ipc_bind_service_bytes);
        tcase_add_test(tc, test_ipc_invoke_reply_roundtrip);
        tcase_add_test(tc, test_producer_port_methods);
        suite_add_tcase(s, tc);

        if (with_sample) {
                tc = tcase_create("sample");
                tcase_add_test(tc, test_sample_packets);
                tcase_add_test(tc, test_sample_event_count);
                tcase_add_test(tc, test_sample_typed_events);
                tcase_add_test(tc, test_sample_generic_descriptors);
                tcase_add_test(tc, test_sample_ftrace_stats);
                tcase_add_test(tc, test_sample_repack_keeps_unknown_fields);
                suite_add_tcase(s, tc);
        }
        return s;
}

int main(void) {
        SRunner *sr;
        bool with_sample;
        int failed, r;

        r = sample_load();
        with_sample = r >= 0;
        if (r == -ENOENT)
                fprintf(stderr, "reference trace not found, skipping the sample tests\n");
        else if (r < 0) {
                fprintf(stderr, "cannot load the reference trace: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }

        sr = srunner_create(protos_suite(with_sample));
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        sample_free();
        if (failed)
                return EXIT_FAILURE;
        /* A missing reference trace means part of the suite did not run. */
        return with_sample ? EXIT_SUCCESS : 77;
}
