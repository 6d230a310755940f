package svc;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.wire.bson.BsonDecoder;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

/**
 * Runs the requests a MongoDB driver sends through a throwaway server of the same code, over a real
 * socket, before the real server starts listening: the legacy {@code isMaster} handshake (OP_QUERY),
 * then {@code isMaster}, {@code ping}, index creation and the CRUD commands (OP_MSG), a duplicate key among
 * them. A JVM that has just started answers its first requests slowly while it loads and compiles
 * their code (measured on a busy 2-core machine: 0.1-1.4 s for the first handshake); after this, the
 * first client of the real server is answered in milliseconds, as by a real {@code mongod}, which
 * accepts connections only once it is ready to serve. Never fatal: a failure is reported on stderr.
 */
final class WarmUp {

    private static final int OP_REPLY = 1;
    private static final int OP_QUERY = 2004;
    private static final int OP_MSG = 2013;

    private WarmUp() {
    }

    /** {@code rounds} rounds of every request against {@code warm}, which is shut down after. */
    static void run(MongoServer warm, int rounds) {
        try {
            InetSocketAddress address = warm.bind();
            try (Socket socket = new Socket(address.getAddress(), address.getPort())) {
                socket.setTcpNoDelay(true);
                socket.setSoTimeout(10_000);
                Client client = new Client(socket);
                for (int round = 0; round < rounds; round++) {
                    round(client, round);
                }
                client.msg(new Document("dropDatabase", 1).append("$db", "warmup"));
            }
        } catch (IOException | RuntimeException e) {
            System.err.println("mongo-test-server: warm-up failed (continuing): " + e);
        } finally {
            warm.shutdown();
        }
    }

    private static void round(Client c, int round) throws IOException {
        String id = "w" + round;
        c.query(new Document("isMaster", 1).append("helloOk", true)
                .append("client", new Document("driver", new Document("name", "warm-up").append("version", "0"))));
        c.msg(new Document("isMaster", 1).append("$db", "admin")); // the monitor's check ("hello" is not known to it)
        c.msg(new Document("ping", 1).append("$db", "admin"));
        c.msg(new Document("createIndexes", "items").append("$db", "warmup").append("indexes",
                List.of(new Document("key", new Document("email", 1)).append("name", "email_1").append("unique", true))));
        Document item = new Document("_id", id).append("email", id + "@example.test").append("n", round).append("tags", List.of("a"));
        c.msg(new Document("insert", "items").append("$db", "warmup").append("ordered", true).append("documents", List.of(item)));
        c.msg(new Document("insert", "items").append("$db", "warmup").append("ordered", true).append("documents", List.of(item)));
        c.msg(new Document("find", "items").append("$db", "warmup").append("filter", new Document("_id", id))
                .append("limit", 1).append("singleBatch", true).append("batchSize", 1));
        c.msg(new Document("find", "items").append("$db", "warmup")
                .append("filter", new Document("tags", new Document("$in", List.of("a"))).append("n", new Document("$gte", 0)))
                .append("sort", new Document("n", -1)).append("skip", 0).append("limit", 10));
        c.msg(new Document("aggregate", "items").append("$db", "warmup").append("cursor", new Document())
                .append("pipeline", List.of(new Document("$match", new Document("n", new Document("$gte", 0))),
                        new Document("$group", new Document("_id", 1).append("n", new Document("$sum", 1))))));
        c.msg(new Document("findAndModify", "items").append("$db", "warmup").append("query", new Document("_id", id))
                .append("update", new Document("$set", new Document("n", -1)).append("$addToSet", new Document("tags", "b")))
                .append("new", true));
        c.msg(new Document("update", "items").append("$db", "warmup").append("ordered", true).append("updates",
                List.of(new Document("q", new Document("_id", id)).append("u", item).append("upsert", true))));
        c.msg(new Document("delete", "items").append("$db", "warmup").append("ordered", true).append("deletes",
                List.of(new Document("q", new Document("_id", id)).append("limit", 1))));
    }

    /** One connection speaking the wire protocol: a request, then its reply, in turn. */
    private static final class Client {
        private final OutputStream out;
        private final DataInputStream in;
        private int requestId;

        Client(Socket socket) throws IOException {
            this.out = socket.getOutputStream();
            this.in = new DataInputStream(socket.getInputStream());
        }

        /** OP_QUERY on admin.$cmd: how a driver opens a connection. */
        Document query(Document command) throws IOException {
            ByteBuf buf = header(OP_QUERY);
            buf.writeIntLE(0); // flags
            buf.writeBytes("admin.$cmd".getBytes(StandardCharsets.UTF_8)).writeByte(0);
            buf.writeIntLE(0); // numberToSkip
            buf.writeIntLE(-1); // numberToReturn
            BsonEncoder.encodeDocument(command, buf);
            return send(buf);
        }

        /** OP_MSG with one body section. */
        Document msg(Document command) throws IOException {
            ByteBuf buf = header(OP_MSG);
            buf.writeIntLE(0); // flagBits
            buf.writeByte(0); // section kind 0: body
            BsonEncoder.encodeDocument(command, buf);
            return send(buf);
        }

        private ByteBuf header(int opCode) {
            ByteBuf buf = Unpooled.buffer();
            buf.writeIntLE(0); // messageLength, set in send()
            buf.writeIntLE(++requestId);
            buf.writeIntLE(0); // responseTo
            buf.writeIntLE(opCode);
            return buf;
        }

        private Document send(ByteBuf buf) throws IOException {
            try {
                buf.setIntLE(0, buf.readableBytes());
                byte[] bytes = new byte[buf.readableBytes()];
                buf.readBytes(bytes);
                out.write(bytes);
                out.flush();
            } finally {
                buf.release();
            }
            byte[] head = new byte[16];
            in.readFully(head);
            ByteBuf h = Unpooled.wrappedBuffer(head);
            int length = h.readIntLE();
            h.skipBytes(8);
            int opCode = h.readIntLE();
            byte[] body = new byte[length - 16];
            in.readFully(body);
            ByteBuf b = Unpooled.wrappedBuffer(body);
            if (opCode == OP_MSG) {
                b.skipBytes(5); // flagBits, section kind
            } else if (opCode == OP_REPLY) {
                b.skipBytes(20); // responseFlags, cursorID, startingFrom, numberReturned
            } else {
                throw new IOException("unexpected reply op code " + opCode);
            }
            Document reply = BsonDecoder.decodeBson(b);
            if (!Double.valueOf(1.0).equals(toDouble(reply.get("ok")))) {
                throw new IOException("command failed: " + reply);
            }
            return reply;
        }

        private static Double toDouble(Object value) {
            return value instanceof Number n ? n.doubleValue() : null;
        }
    }
}
