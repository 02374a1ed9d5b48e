// The oracle for pycanal.mq: Canal's own MQ classes (connector.core's MQMessageUtils and
// CanalMessageSerializerUtil, canal.protocol's FlatMessage, fastjson2) on the entries pycanal builds.
// Run with Canal's jars on the class path: `java -cp "$PYCANAL_CANAL_HOME/lib/*" CanalMqOracle.java`.
//
// stdin: one case per line, tab-separated, strings base64 (UTF-8); stdout: one line per case,
// "OK" and tab-separated results, or "ERR" and the exception's class name.
//   records  batchId raw flat dbHash filterTx topic partition partitionsNum partitionHash
//            dynamicTopic dynamicTopicPartitionNum ts entries(comma-separated base64)
//            -> records as topic(b64),partition,value(b64 or "null"), topics sorted, send order kept
//   hashmode name config  -> null | auto | table | cols:<b64 of the names joined by "\n">
//   matchdyn name config  -> true | false
//   topicpn  name config  -> the partition count or null
//
// The "records" case lays out a batch the way CanalKafkaProducer.send does (which needs a live
// producer, so it is not called): dynamic topics, the partition count per topic, then flat or
// protobuf, partitioned or not. The flat messages' ts (the build clock) is set to the given one.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONWriter;
import com.alibaba.otter.canal.connector.core.producer.MQMessageUtils;
import com.alibaba.otter.canal.connector.core.util.CanalMessageSerializerUtil;
import com.alibaba.otter.canal.protocol.CanalEntry;
import com.alibaba.otter.canal.protocol.FlatMessage;
import com.alibaba.otter.canal.protocol.Message;
import com.google.protobuf.ByteString;

public class CanalMqOracle {

    static final ThreadPoolExecutor POOL = new ThreadPoolExecutor(2, 2, 0, TimeUnit.SECONDS,
        new ArrayBlockingQueue<>(4), new ThreadPoolExecutor.CallerRunsPolicy());

    static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    static String b64(byte[] bytes) {
        return bytes == null ? "null" : Base64.getEncoder().encodeToString(bytes);
    }

    static String b64(String s) {
        return b64(s.getBytes(StandardCharsets.UTF_8));
    }

    static Integer optInt(String s) {
        return s.equals("-") ? null : Integer.valueOf(s);
    }

    static final class Options {
        boolean flat, dbHash, filterTx;
        Integer partition, partitionsNum;
        String partitionHash, dynamicTopicPartitionNum;
        long ts;
    }

    static void flatRecords(List<String> out, String topic, Message message, Options o, Integer n) {
        List<FlatMessage> flats = MQMessageUtils.messageConverter(MQMessageUtils.buildMessageData(message, POOL),
            message.getId());
        for (FlatMessage flat : flats) {
            flat.setTs(o.ts);
            FlatMessage[] parts;
            int[] slots;
            if (o.partitionHash.isEmpty()) {
                parts = new FlatMessage[] { flat };
                slots = new int[] { o.partition == null ? 0 : o.partition };
            } else {
                parts = MQMessageUtils.messagePartition(flat, n, o.partitionHash, o.dbHash);
                slots = new int[parts.length];
                for (int i = 0; i < parts.length; i++) slots[i] = i;
            }
            for (int i = 0; i < parts.length; i++) {
                if (parts[i] == null) continue;
                byte[] value = JSON.toJSONBytes(parts[i], JSONWriter.Feature.WriteNulls, JSONWriter.Feature.LargeObject);
                out.add(b64(topic) + "," + slots[i] + "," + b64(value));
            }
        }
    }

    static void protobufRecords(List<String> out, String topic, Message message, Options o, Integer n) {
        if (o.partitionHash.isEmpty()) {
            int slot = o.partition == null ? 0 : o.partition;
            out.add(b64(topic) + "," + slot + "," + b64(CanalMessageSerializerUtil.serializer(message, o.filterTx)));
            return;
        }
        Message[] parts = MQMessageUtils.messagePartition(MQMessageUtils.buildMessageData(message, POOL),
            message.getId(), n, o.partitionHash, o.dbHash);
        for (int i = 0; i < parts.length; i++) {
            if (parts[i] != null) {
                out.add(b64(topic) + "," + i + "," + b64(CanalMessageSerializerUtil.serializer(parts[i], o.filterTx)));
            }
        }
    }

    static void topicRecords(List<String> out, String topic, Message message, Options o) {
        Integer n = MQMessageUtils.parseDynamicTopicPartition(topic, o.dynamicTopicPartitionNum);
        if (n == null) n = o.partitionsNum;
        if (o.flat) flatRecords(out, topic, message, o, n);
        else protobufRecords(out, topic, message, o, n);
    }

    static String records(String[] f) throws Exception {
        long batchId = Long.parseLong(f[1]);
        boolean raw = f[2].equals("1");
        Options o = new Options();
        o.flat = f[3].equals("1");
        o.dbHash = f[4].equals("1");
        o.filterTx = f[5].equals("1");
        String topic = text(f[6]);
        o.partition = optInt(f[7]);
        o.partitionsNum = optInt(f[8]);
        o.partitionHash = text(f[9]);
        String dynamicTopic = text(f[10]);
        o.dynamicTopicPartitionNum = text(f[11]);
        o.ts = Long.parseLong(f[12]);
        List<ByteString> rawEntries = new ArrayList<>();
        List<CanalEntry.Entry> entries = new ArrayList<>();
        if (f.length > 13 && !f[13].isEmpty()) {
            for (String e : f[13].split(",")) {
                ByteString bytes = ByteString.copyFrom(Base64.getDecoder().decode(e));
                rawEntries.add(bytes);
                entries.add(CanalEntry.Entry.parseFrom(bytes));
            }
        }
        Message message = raw ? new Message(batchId, true, rawEntries) : new Message(batchId, entries);
        List<String> out = new ArrayList<>();
        if (dynamicTopic.isEmpty()) {
            topicRecords(out, topic, message, o);
        } else {
            Map<String, Message> byTopic = new TreeMap<>(MQMessageUtils.messageTopics(message, topic, dynamicTopic));
            Map<String, Message> renamed = new TreeMap<>();
            for (Map.Entry<String, Message> e : byTopic.entrySet()) renamed.put(e.getKey().replace('.', '_'), e.getValue());
            for (Map.Entry<String, Message> e : renamed.entrySet()) topicRecords(out, e.getKey(), e.getValue(), o);
        }
        return String.join("\t", out);
    }

    static String hashMode(String[] f) {
        MQMessageUtils.HashMode mode = MQMessageUtils.getPartitionHashColumns(text(f[1]), text(f[2]));
        if (mode == null) return "null";
        if (mode.autoPkHash) return "auto";
        if (mode.tableHash) return "table";
        return "cols:" + b64(String.join("\n", mode.pkNames));
    }

    public static void main(String[] args) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", -1);
            String result;
            try {
                switch (f[0]) {
                    case "records": result = records(f); break;
                    case "hashmode": result = hashMode(f); break;
                    case "matchdyn": result = String.valueOf(MQMessageUtils.matchDynamicTopic(text(f[1]), text(f[2]))); break;
                    case "topicpn": result = String.valueOf(MQMessageUtils.parseDynamicTopicPartition(text(f[1]), text(f[2]))); break;
                    default: throw new IllegalArgumentException("unknown case " + f[0]);
                }
                out.append("OK\t").append(result).append('\n');
            } catch (Throwable e) {
                Throwable root = e;
                while (root.getCause() != null) root = root.getCause();
                out.append("ERR\t").append(root.getClass().getName()).append('\n');
            }
        }
        POOL.shutdown();
        System.out.print(out);
        System.out.flush();
    }
}
