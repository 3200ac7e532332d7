// An NFQUEUE reader that hands JavaScript every packet waiting at a wakeup in
// one call, and sends a wakeup's verdicts in one sendto().
//
// The `nfqueue` binding reads one packet per poll callback (one recv, one
// JavaScript call with a 12-property object and four interface-name strings
// made for it) and sends each verdict with its own syscall. Here a readable
// socket is drained with non-blocking recv() calls until it is empty or the
// batch is full; each packet's id, mark and payload are copied into an
// ArrayBuffer the JavaScript side owns (a 16-byte slot per packet in its
// head, the payloads after), and one call tells it how many there are. The
// verdicts come back the same way: an array of (id, verdict, mark, flags)
// slots, one NFQNL_MSG_VERDICT message each, all in one sendto(); the
// kernel's nfnetlink handles the messages of one datagram in order, as if
// each had been sent alone.
//
// Queue set-up uses libnetfilter_queue (nfq_open, nfq_create_queue,
// nfq_set_mode) as the binding does, so the kernel sees the same peer.

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <node_api.h>
#include <uv.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

// A packet's slot in the head of the receive buffer: id, mark, payload offset, payload length (host order).
#define SLOT_WORDS 4
// A verdict's slot: id, verdict, mark, flags (bit 0: set the mark).
#define VERDICT_WORDS 4
#define VERDICT_SET_MARK 1u
// Room for one verdict message: header, nfgenmsg, verdict attribute, mark attribute.
#define VERDICT_MESSAGE_BYTES (NLMSG_ALIGN(sizeof(struct nlmsghdr)) + NLMSG_ALIGN(sizeof(struct nfgenmsg)) + NLA_ALIGN(NLA_HDRLEN + sizeof(struct nfqnl_msg_verdict_hdr)) + NLA_ALIGN(NLA_HDRLEN + sizeof(uint32_t)))
// One netlink datagram from the queue: a packet of up to 64 KiB and its attributes.
#define RECV_BYTES (65536 + 4096)

typedef struct {
  napi_env env;
  napi_ref callback;
  napi_ref receive_ref;
  napi_async_context async_context;
  struct nfq_handle* handle;
  struct nfq_q_handle* queue;
  uint16_t queue_id;
  int fd;
  uv_poll_t poll;
  int polling;
  // The JavaScript side's receive buffer: max_packets slots, then the payload area.
  uint8_t* receive;
  size_t receive_bytes;
  uint32_t max_packets;
  uint32_t count;
  size_t payload_used;
  // Set while a batch is delivered, so a callback cannot re-enter the reader.
  int delivering;
  char* recv_buffer;
  // Verdict messages are built here; grows with the largest batch seen.
  uint8_t* send_buffer;
  size_t send_capacity;
} Reader;

static napi_value throw_error(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

static void deliver(Reader* reader);

// libnetfilter_queue's per-packet callback, called from nfq_handle_packet: copy the packet into the next slot.
static int on_packet(struct nfq_q_handle* qh, struct nfgenmsg* nfmsg, struct nfq_data* nfad, void* data) {
  (void)qh;
  (void)nfmsg;
  Reader* reader = (Reader*)data;
  struct nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(nfad);
  unsigned char* payload = NULL;
  int length = nfq_get_payload(nfad, &payload);
  if (length < 0) length = 0;
  size_t head = (size_t)reader->max_packets * SLOT_WORDS * sizeof(uint32_t);
  // A full batch, or a payload that does not fit: hand over what we have first.
  if (reader->count == reader->max_packets || head + reader->payload_used + (size_t)length > reader->receive_bytes) deliver(reader);
  if (head + (size_t)length > reader->receive_bytes) length = (int)(reader->receive_bytes - head);
  uint32_t* slot = (uint32_t*)(reader->receive + (size_t)reader->count * SLOT_WORDS * sizeof(uint32_t));
  slot[0] = header ? ntohl(header->packet_id) : 0;
  slot[1] = nfq_get_nfmark(nfad);
  slot[2] = (uint32_t)(head + reader->payload_used);
  slot[3] = (uint32_t)length;
  if (length > 0) memcpy(reader->receive + head + reader->payload_used, payload, (size_t)length);
  reader->payload_used += (size_t)length;
  reader->count++;
  return 0;
}

// Calls the JavaScript callback with the number of packets in the receive buffer, then empties it.
static void deliver(Reader* reader) {
  if (reader->count == 0) return;
  napi_env env = reader->env;
  uint32_t count = reader->count;
  reader->count = 0;
  reader->payload_used = 0;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value callback, global, argv[1], result;
  napi_get_reference_value(env, reader->callback, &callback);
  napi_get_global(env, &global);
  napi_create_uint32(env, count, &argv[0]);
  reader->delivering = 1;
  napi_status status = napi_make_callback(env, reader->async_context, global, callback, 1, argv, &result);
  reader->delivering = 0;
  if (status == napi_pending_exception) {
    napi_value error;
    napi_get_and_clear_last_exception(env, &error);
    napi_fatal_exception(env, error);
  }
  napi_close_handle_scope(env, scope);
}

// The socket is readable: drain it (until EAGAIN), then deliver what was read.
static void on_readable(uv_poll_t* poll, int status, int events) {
  (void)events;
  Reader* reader = (Reader*)poll->data;
  if (status < 0 || reader->delivering) return;
  for (;;) {
    ssize_t got = recv(reader->fd, reader->recv_buffer, RECV_BYTES, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: drained. ENOBUFS cannot happen (NETLINK_NO_ENOBUFS); anything else ends this wakeup too.
      break;
    }
    if (got == 0) break;
    nfq_handle_packet(reader->handle, reader->recv_buffer, (int)got);
    if (reader->count == reader->max_packets) break;
  }
  deliver(reader);
}

static void close_queue(Reader* reader) {
  if (reader->polling) {
    uv_poll_stop(&reader->poll);
    reader->polling = 0;
  }
  if (reader->queue) {
    nfq_destroy_queue(reader->queue);
    reader->queue = NULL;
  }
  if (reader->handle) {
    nfq_close(reader->handle);
    reader->handle = NULL;
  }
}

// open(queueId, socketBufferBytes, copyBytes, receive: ArrayBuffer, maxPackets, onPacket(count)) -> reader
static napi_value open_queue(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 6) return throw_error(env, "KWP_ERR_DATAPLANE", "open(queueId, socketBufferBytes, copyBytes, receive, maxPackets, onPacket)");
  uint32_t queue_id, socket_bytes, copy_bytes, max_packets;
  napi_get_value_uint32(env, argv[0], &queue_id);
  napi_get_value_uint32(env, argv[1], &socket_bytes);
  napi_get_value_uint32(env, argv[2], &copy_bytes);
  napi_get_value_uint32(env, argv[4], &max_packets);
  void* receive = NULL;
  size_t receive_bytes = 0;
  if (napi_get_arraybuffer_info(env, argv[3], &receive, &receive_bytes) != napi_ok) return throw_error(env, "KWP_ERR_DATAPLANE", "receive must be an ArrayBuffer");
  if (max_packets == 0 || (size_t)max_packets * SLOT_WORDS * sizeof(uint32_t) >= receive_bytes) return throw_error(env, "KWP_ERR_DATAPLANE", "receive is too small for maxPackets slots");

  Reader* reader = calloc(1, sizeof(Reader));
  if (!reader) return throw_error(env, "KWP_ERR_DATAPLANE", "out of memory");
  reader->env = env;
  reader->queue_id = (uint16_t)queue_id;
  reader->receive = receive;
  reader->receive_bytes = receive_bytes;
  reader->max_packets = max_packets;
  reader->recv_buffer = malloc(RECV_BYTES);
  reader->handle = reader->recv_buffer ? nfq_open() : NULL;
  if (!reader->handle) {
    free(reader->recv_buffer);
    free(reader);
    return throw_error(env, "KWP_ERR_DATAPLANE", "nfq_open failed (root or CAP_NET_ADMIN needed)");
  }
  reader->queue = nfq_create_queue(reader->handle, (uint16_t)queue_id, &on_packet, reader);
  if (!reader->queue) {
    int error = errno;
    close_queue(reader);
    free(reader->recv_buffer);
    free(reader);
    return throw_error(env, "KWP_ERR_DATAPLANE", error == EBUSY || error == EPERM ? "the queue is bound by another process" : "nfq_create_queue failed");
  }
  if (nfq_set_mode(reader->queue, NFQNL_COPY_PACKET, copy_bytes) < 0) {
    close_queue(reader);
    free(reader->recv_buffer);
    free(reader);
    return throw_error(env, "KWP_ERR_DATAPLANE", "nfq_set_mode failed");
  }
  reader->fd = nfq_fd(reader->handle);
  nfnl_rcvbufsiz(nfq_nfnlh(reader->handle), socket_bytes);
  // A full socket buffer drops packets (the kernel then counts them in queue_dropped) instead of failing our reads.
  int on = 1;
  setsockopt(reader->fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof(on));

  napi_create_reference(env, argv[5], 1, &reader->callback);
  napi_create_reference(env, argv[3], 1, &reader->receive_ref);
  napi_value resource_name;
  napi_create_string_utf8(env, "kwp-nfqueue-batch", NAPI_AUTO_LENGTH, &resource_name);
  napi_async_init(env, NULL, resource_name, &reader->async_context);

  uv_loop_t* loop;
  napi_get_uv_event_loop(env, &loop);
  uv_poll_init_socket(loop, &reader->poll, reader->fd);
  reader->poll.data = reader;
  uv_poll_start(&reader->poll, UV_READABLE, on_readable);
  reader->polling = 1;

  napi_value external;
  napi_create_external(env, reader, NULL, NULL, &external);
  return external;
}

// verdicts(reader, slots: ArrayBuffer, count) -> 0, or -errno when the kernel refused the datagram
static napi_value send_verdicts(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  Reader* reader = NULL;
  if (argc < 3 || napi_get_value_external(env, argv[0], (void**)&reader) != napi_ok || !reader) return throw_error(env, "KWP_ERR_DATAPLANE", "verdicts(reader, slots, count)");
  void* slots_data = NULL;
  size_t slots_bytes = 0;
  napi_get_arraybuffer_info(env, argv[1], &slots_data, &slots_bytes);
  uint32_t count = 0;
  napi_get_value_uint32(env, argv[2], &count);
  if ((size_t)count * VERDICT_WORDS * sizeof(uint32_t) > slots_bytes) return throw_error(env, "KWP_ERR_DATAPLANE", "more verdicts than slots");
  napi_value result;
  if (!reader->handle) {
    napi_create_int32(env, -EBADF, &result);
    return result;
  }
  size_t need = (size_t)count * VERDICT_MESSAGE_BYTES;
  if (need > reader->send_capacity) {
    uint8_t* grown = realloc(reader->send_buffer, need);
    if (!grown) return throw_error(env, "KWP_ERR_DATAPLANE", "out of memory");
    reader->send_buffer = grown;
    reader->send_capacity = need;
  }
  const uint32_t* slots = (const uint32_t*)slots_data;
  uint8_t* at = reader->send_buffer;
  for (uint32_t i = 0; i < count; i++) {
    const uint32_t* v = slots + (size_t)i * VERDICT_WORDS;
    struct nlmsghdr* nlh = (struct nlmsghdr*)at;
    memset(at, 0, VERDICT_MESSAGE_BYTES);
    nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    nlh->nlmsg_len = NLMSG_ALIGN(sizeof(struct nlmsghdr));
    struct nfgenmsg* g = (struct nfgenmsg*)(at + nlh->nlmsg_len);
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(reader->queue_id);
    nlh->nlmsg_len += NLMSG_ALIGN(sizeof(struct nfgenmsg));
    struct nlattr* attr = (struct nlattr*)(at + nlh->nlmsg_len);
    attr->nla_type = NFQA_VERDICT_HDR;
    attr->nla_len = NLA_HDRLEN + sizeof(struct nfqnl_msg_verdict_hdr);
    struct nfqnl_msg_verdict_hdr* vh = (struct nfqnl_msg_verdict_hdr*)((uint8_t*)attr + NLA_HDRLEN);
    vh->verdict = htonl(v[1]);
    vh->id = htonl(v[0]);
    nlh->nlmsg_len += NLA_ALIGN(attr->nla_len);
    if (v[3] & VERDICT_SET_MARK) {
      attr = (struct nlattr*)(at + nlh->nlmsg_len);
      attr->nla_type = NFQA_MARK;
      attr->nla_len = NLA_HDRLEN + sizeof(uint32_t);
      uint32_t mark = htonl(v[2]);
      memcpy((uint8_t*)attr + NLA_HDRLEN, &mark, sizeof(mark));
      nlh->nlmsg_len += NLA_ALIGN(attr->nla_len);
    }
    at += NLMSG_ALIGN(nlh->nlmsg_len);
  }
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  ssize_t sent;
  do {
    sent = sendto(reader->fd, reader->send_buffer, (size_t)(at - reader->send_buffer), 0, (struct sockaddr*)&kernel, sizeof(kernel));
  } while (sent < 0 && errno == EINTR);
  napi_create_int32(env, sent < 0 ? -errno : 0, &result);
  return result;
}

// close(reader): stop reading and unbind the queue (the binding cannot).
static napi_value close_reader(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  Reader* reader = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], (void**)&reader) != napi_ok || !reader) return throw_error(env, "KWP_ERR_DATAPLANE", "close(reader)");
  if (reader->handle) {
    close_queue(reader);
    napi_delete_reference(env, reader->callback);
    napi_delete_reference(env, reader->receive_ref);
    napi_async_destroy(env, reader->async_context);
    free(reader->recv_buffer);
    reader->recv_buffer = NULL;
    free(reader->send_buffer);
    reader->send_buffer = NULL;
    reader->send_capacity = 0;
    // The reader itself stays (a few hundred bytes): the uv_poll_t inside it is
    // libuv's until the close completes, and JavaScript may still hold the external.
    uv_close((uv_handle_t*)&reader->poll, NULL);
  }
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn, n;
  napi_create_function(env, "open", NAPI_AUTO_LENGTH, open_queue, NULL, &fn);
  napi_set_named_property(env, exports, "open", fn);
  napi_create_function(env, "verdicts", NAPI_AUTO_LENGTH, send_verdicts, NULL, &fn);
  napi_set_named_property(env, exports, "verdicts", fn);
  napi_create_function(env, "close", NAPI_AUTO_LENGTH, close_reader, NULL, &fn);
  napi_set_named_property(env, exports, "close", fn);
  napi_create_uint32(env, SLOT_WORDS, &n);
  napi_set_named_property(env, exports, "slotWords", n);
  napi_create_uint32(env, VERDICT_WORDS, &n);
  napi_set_named_property(env, exports, "verdictWords", n);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
