import java.io.FileInputStream;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningData;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningListener;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitor;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitors;
import com.alibaba.otter.canal.connector.core.spi.CanalMQProducer;
import com.alibaba.otter.canal.connector.core.spi.ExtensionLoader;
import com.alibaba.otter.canal.connector.core.spi.ProxyCanalMQProducer;
import com.alibaba.otter.canal.instance.spring.SpringCanalInstanceGenerator;
import com.alibaba.otter.canal.server.CanalMQStarter;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;
import com.alibaba.otter.canal.server.netty.CanalServerWithNetty;

/**
 * pycanal's stand-in for Canal's deployer ({@code com.alibaba.otter.canal.deployer.CanalLauncher}), which
 * Maven Central does not serve: it wires Canal's own server classes (canal.server, canal.instance.spring,
 * and through them parse/sink/store/meta) the way the deployer does for a standalone server in Spring mode.
 *
 * <p>Reads {@code canal.properties} ({@code -Dcanal.conf=FILE}, else {@code canal.properties} on the
 * classpath); a key is looked up as a system property, then an environment variable, then in the file, as
 * Canal does. Supported: {@code canal.destinations}, {@code canal.instance.global.spring.xml} and
 * {@code canal.instance.<destination>.spring.xml}, {@code canal.ip}, {@code canal.port}, {@code canal.user}
 * / {@code canal.passwd} (1.1.8's rule: a user needs a password), {@code canal.metrics.pull.port},
 * {@code canal.withoutNetty}, {@code canal.instance.global.lazy} and {@code canal.instance.<destination>.lazy}
 * (a running monitor per destination, started at once or by the first subscription), {@code canal.serverMode} (an MQ producer loaded from {@code ../plugin} by
 * Canal's ExtensionLoader). Not supported: ZooKeeper, the admin port and manager, the instance auto-scan.
 *
 * <p>Prints {@code PYCANAL-CANAL STARTED} on stdout when every destination and the TCP port are up, and
 * {@code PYCANAL-CANAL FAILED <reason>} (exit code 2) when start-up fails. Stops on SIGTERM.
 */
public final class PycanalCanalMain {

    private static final Logger LOG = LoggerFactory.getLogger(PycanalCanalMain.class);

    private static Properties props;

    static String get(String key, String fallback) {
        String value = System.getProperty(key);
        if (value == null) {
            value = System.getenv(key);
        }
        if (value == null) {
            value = props.getProperty(key);
        }
        value = value == null ? null : value.trim();
        return value == null || value.isEmpty() ? fallback : value;
    }

    public static void main(String[] args) {
        try {
            run();
        } catch (Throwable e) {
            LOG.error("## pycanal: Canal failed to start", e);
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            System.out.println("PYCANAL-CANAL FAILED " + root);
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
    }

    /** A destination's running monitor: becoming active starts its instance, leaving stops it. */
    static ServerRunningMonitor monitor(CanalServerWithEmbedded embedded, String destination) {
        ServerRunningMonitor monitor = new ServerRunningMonitor(ServerRunningMonitors.getServerData());
        monitor.setDestination(destination);
        monitor.setListener(new ServerRunningListener() {

            public void processStart() {
            }

            public void processStop() {
            }

            public void processActiveEnter() {
                MDC.put("destination", destination);
                try {
                    embedded.start(destination);
                } finally {
                    MDC.remove("destination");
                    // Canal 1.1.8's fix of issue #4907 (commit c8ef9552): 1.1.7's parser "resets" the TSDB's
                    // system properties to "" after building its TSDB, and "" then overrides the next
                    // destination's canal.instance.tsdb.url, so a second TSDB destination never starts.
                    System.getProperties().remove("canal.instance.tsdb.url");
                    System.getProperties().remove("canal.instance.tsdb.dbUsername");
                    System.getProperties().remove("canal.instance.tsdb.dbPassword");
                }
            }

            public void processActiveExit() {
                if (embedded.isStart(destination)) {
                    embedded.stop(destination);
                }
            }
        });
        return monitor;
    }

    private static void run() throws Exception {
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> LOG.error("uncaught exception in " + t.getName(), e));
        props = new Properties();
        String conf = System.getProperty("canal.conf", "classpath:canal.properties");
        try (InputStream in = conf.startsWith("classpath:")
            ? PycanalCanalMain.class.getClassLoader().getResourceAsStream(conf.substring("classpath:".length()))
            : new FileInputStream(conf)) {
            if (in == null) {
                throw new IllegalArgumentException("canal configuration not found: " + conf);
            }
            props.load(in);
        }

        List<String> destinations = new ArrayList<>();
        for (String d : get("canal.destinations", "").split(",")) {
            if (!d.trim().isEmpty()) {
                destinations.add(d.trim());
            }
        }
        String user = get("canal.user", null);
        String passwd = get("canal.passwd", null);
        if (user != null && passwd == null) {
            throw new IllegalArgumentException("canal.user = " + user + " but canal.passwd is empty (Canal 1.1.8)");
        }

        String serverMode = get("canal.serverMode", "tcp");
        CanalMQProducer producer = null;
        if (!"tcp".equalsIgnoreCase(serverMode)) {
            ExtensionLoader<CanalMQProducer> loader = ExtensionLoader.getExtensionLoader(CanalMQProducer.class);
            CanalMQProducer found = loader.getExtension(serverMode.toLowerCase(), "/plugin", "/canal/plugin");
            if (found == null) {
                throw new IllegalArgumentException("no MQ producer for canal.serverMode = " + serverMode);
            }
            producer = new ProxyCanalMQProducer(found);
            producer.init(props);
            System.setProperty("canal.withoutNetty", "true"); // an MQ server serves no TCP port
            if (producer.getMqProperties().isFlatMessage()) {
                System.setProperty("canal.instance.memory.rawEntry", "false");
            }
        }

        final CanalServerWithEmbedded embedded = CanalServerWithEmbedded.instance();
        final String globalXml = get("canal.instance.global.spring.xml", "classpath:spring/file-instance.xml");
        embedded.setCanalInstanceGenerator(destination -> {
            SpringCanalInstanceGenerator generator = new SpringCanalInstanceGenerator();
            generator.setSpringXml(get("canal.instance." + destination + ".spring.xml", globalXml));
            return generator.generate(destination);
        });
        embedded.setMetricsPort(Integer.parseInt(get("canal.metrics.pull.port", "0")));
        embedded.setUser(user);
        embedded.setPasswd(passwd);
        embedded.start();
        // Each destination has a running monitor, as in Canal's CanalController without ZooKeeper: its
        // start starts the instance. A lazy destination (canal.instance.<destination>.lazy, else
        // canal.instance.global.lazy) starts when a client first subscribes (Canal's SessionHandler).
        ServerRunningMonitors.setServerData(new ServerRunningData(get("canal.ip", "127.0.0.1") + ":"
                                                                  + get("canal.port", "11111")));
        ServerRunningMonitors.setRunningMonitors(new ConcurrentHashMap<String, ServerRunningMonitor>() {

            @Override
            public ServerRunningMonitor get(Object key) {
                return computeIfAbsent((String) key, destination -> monitor(embedded, destination));
            }
        });
        for (String destination : destinations) {
            String lazy = get("canal.instance." + destination + ".lazy", get("canal.instance.global.lazy", "false"));
            if (!"true".equalsIgnoreCase(lazy)) {
                ServerRunningMonitors.getRunningMonitor(destination).start();
            }
        }

        CanalServerWithNetty netty = null;
        if (!"true".equalsIgnoreCase(get("canal.withoutNetty", "false"))) {
            netty = CanalServerWithNetty.instance();
            netty.setIp(get("canal.ip", null));
            netty.setPort(Integer.parseInt(get("canal.port", "11111")));
            netty.start();
        }

        CanalMQStarter mqStarter = null;
        if (producer != null) {
            mqStarter = new CanalMQStarter(producer);
            mqStarter.start(String.join(",", destinations));
        }

        final CountDownLatch stopped = new CountDownLatch(1);
        final CanalServerWithNetty tcp = netty;
        final CanalMQStarter mq = mqStarter;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("## pycanal: stopping the canal server");
            try {
                if (tcp != null) {
                    tcp.stop();
                }
                // As the deployer: each destination's MQ worker, then its instance; CanalMQStarter's own
                // shutdown hook stops the producer.
                for (String destination : destinations) {
                    if (mq != null) {
                        mq.stopDestination(destination);
                    }
                    if (embedded.isStart(destination)) {
                        embedded.stop(destination);
                    }
                }
                if (embedded.isStart()) {
                    embedded.stop();
                }
            } catch (Throwable e) {
                LOG.warn("## pycanal: error while stopping", e);
            } finally {
                stopped.countDown();
            }
        }, "pycanal-canal-shutdown"));

        LOG.info("## pycanal: the canal server is running (destinations {}, port {})", destinations,
            get("canal.port", "11111"));
        System.out.println("PYCANAL-CANAL STARTED");
        System.out.flush();
        stopped.await();
    }
}
