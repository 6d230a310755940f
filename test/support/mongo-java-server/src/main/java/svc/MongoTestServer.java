package svc;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

/**
 * Test launcher for mongo-java-server with its in-memory backend.
 *
 * <pre>
 * java -jar mongo-test-server.jar [port] [--ignore-stdin] [--warm-up-rounds=N]
 * </pre>
 *
 * First runs the requests of a driver through a throwaway server ({@link WarmUp}; N rounds, default 5,
 * 0: none), so that LISTENING means ready to answer at speed, as with a real {@code mongod}.
 * Then binds 127.0.0.1 on {@code port} (0 or absent: any free port), then prints exactly one line
 * {@code LISTENING <port>} on stdout. Stops on SIGTERM/SIGINT and, unless {@code --ignore-stdin}
 * is given, when its standard input reaches end of file (so it dies with the process that
 * started it). Logging goes to stderr, warnings and errors only.
 */
public final class MongoTestServer {

    /** MongoDB 4.4 (wire version 9): the mongodb Node driver 7.x refuses the default wire version 8. */
    private static final MongoVersion MONGO_4_4 = new MongoVersion() {
        @Override
        public List<Integer> getVersionArray() {
            return List.of(4, 4, 0);
        }

        @Override
        public int getWireVersion() {
            return 9;
        }
    };

    private MongoTestServer() {
    }

    public static void main(String[] args) throws Exception {
        // Before any logger exists: slf4j-simple reads these once, at its first use.
        setIfAbsent("org.slf4j.simpleLogger.logFile", "System.err");
        setIfAbsent("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setIfAbsent("org.slf4j.simpleLogger.showThreadName", "false");
        setIfAbsent("org.slf4j.simpleLogger.showShortLogName", "true");

        int port = 0;
        boolean watchStdin = true;
        // Measured on a busy 2-core machine: 5 rounds take the first handshake of a client from
        // 0.4-1.2 s to ~0.1 s; more rounds gain nothing measurable.
        int warmUpRounds = 5;
        for (String arg : args) {
            if (arg.equals("--ignore-stdin")) {
                watchStdin = false;
            } else if (arg.startsWith("--warm-up-rounds=")) {
                warmUpRounds = Integer.parseInt(arg.substring("--warm-up-rounds=".length()));
            } else {
                try {
                    port = Integer.parseInt(arg);
                } catch (NumberFormatException e) {
                    System.err.println("usage: java -jar mongo-test-server.jar [port] [--ignore-stdin] [--warm-up-rounds=N]");
                    System.exit(2);
                    return;
                }
            }
        }

        // Before listening: a JVM answers its first requests slowly (see WarmUp).
        long warmUpStart = System.nanoTime();
        if (warmUpRounds > 0) {
            WarmUp.run(new MongoServer(new MemoryBackend().version(MONGO_4_4)), warmUpRounds);
        }
        long warmUpTook = (System.nanoTime() - warmUpStart) / 1_000_000;

        MongoBackend backend = new MemoryBackend().version(MONGO_4_4);
        MongoServer server = new MongoServer(backend);
        // One worker thread, so each request is handled AND its answer encoded before any other request
        // runs, as a real mongod's document-level atomicity promises. With netty's default pool, a
        // findAndModify answer is encoded from the live in-memory document after the collection lock is
        // released: another connection's write could land in between, so an update matched at epoch 0
        // answered with epoch 1 (seen 1 in ~25 rounds, svc's magic-link-vs-logout-all race test), and a
        // key added meanwhile broke the encoding (ConcurrentModificationException, connection closed).
        server.bind(new InetSocketAddress("127.0.0.1", port), 1, 1);

        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean shutDown = new AtomicBoolean(false);
        Runnable shutdown = () -> {
            if (shutDown.compareAndSet(false, true)) {
                try {
                    server.shutdownNow();
                } catch (RuntimeException e) {
                    System.err.println("mongo-test-server: shutdown failed: " + e);
                }
            }
            stopped.countDown();
        };
        Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "mongo-test-server-shutdown"));

        InetSocketAddress address = server.getLocalAddress();
        if (System.getenv("MONGO_TEST_SERVER_VERBOSE") != null) {
            System.err.println("mongo-test-server: warmed up in " + warmUpTook + " ms");
        }
        System.out.println("LISTENING " + address.getPort());
        System.out.flush();

        if (watchStdin) {
            Thread watcher = new Thread(() -> {
                drain(System.in);
                shutdown.run();
            }, "mongo-test-server-stdin");
            watcher.setDaemon(true);
            watcher.start();
        }

        stopped.await();
        System.exit(0);
    }

    private static void drain(InputStream in) {
        byte[] buffer = new byte[256];
        try {
            while (in.read(buffer) >= 0) {
                // Input is ignored: only its end matters.
            }
        } catch (IOException e) {
            // A broken stdin counts as closed.
        }
    }

    private static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }
}
