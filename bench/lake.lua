-- bench/lake.py's writer: 1-row transactions (autocommit) spread at random over --tables tables
-- lake1..lakeN (id INT PRIMARY KEY, v INT, s VARCHAR(64)) of --rows rows each (ids 1..rows):
-- 60% INSERT of a new id, 30% UPDATE of a random id, 10% DELETE of a random id (--mix changes
-- the shares: 0,100,0 keeps the tables' sizes). sysbench's --rate paces it.

sysbench.cmdline.options = {
  tables = {"tables", 200},
  rows = {"rows per table before the run (ids 1..rows)", 1000},
  base = {"first id of the inserts (ids above it are new)", 10000000},
  mix = {"percent INSERT,UPDATE,DELETE", "60,30,10"},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  -- inserts take ids no other thread (or run) takes: base + thread * 10M + n
  next_id = sysbench.opt.base + sysbench.tid * 10000000
  local i, u = string.match(sysbench.opt.mix, "^(%d+),(%d+),%d+$")
  if not i then
    error("--mix must be three percents INSERT,UPDATE,DELETE (e.g. 60,30,10), not " .. sysbench.opt.mix)
  end
  inserts, updates = tonumber(i), tonumber(i) + tonumber(u)
end

function thread_done()
  con:disconnect()
end

function event()
  local t = sysbench.rand.uniform(1, sysbench.opt.tables)
  local r = sysbench.rand.uniform(1, 100)
  if r <= inserts then
    next_id = next_id + 1
    con:query(string.format("INSERT INTO lake%d (id, v, s) VALUES (%d, %d, 'row %d')", t, next_id, r, next_id))
  elseif r <= updates then
    con:query(string.format("UPDATE lake%d SET v = v + 1 WHERE id = %d", t,
                            sysbench.rand.uniform(1, sysbench.opt.rows)))
  else
    con:query(string.format("DELETE FROM lake%d WHERE id = %d", t, sysbench.rand.uniform(1, sysbench.opt.rows)))
  end
end
