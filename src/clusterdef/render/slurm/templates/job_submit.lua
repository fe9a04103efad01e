-- A job that names no QOS runs under the QOS of the partition it is sent to (slurm.conf
-- `PartitionName=... QOS=`), so the tier the definition binds to a partition (the QOS's priority,
-- what it preempts, what preempts it) is the job's own. Slurm alone would give such a job its
-- association's DefaultQOS: a partition's QOS lends the partition its limits, "not ... any priority
-- or preemption characteristics" (qos.shtml, Partition QOS; slurm.conf(5) QOS). AllowQos on those
-- partitions refuses a job that names another tier's QOS there.
--
-- A job that names no constraint, sent to partitions that hold nodes of several GPU models, gets the
-- constraint "[m1|m2|...]" over those models (GPU_MODELS above, from the definition; each node's Features
-- carry its GPU type): sbatch(1) --constraint, "Matching OR": "only one of a set of possible options
-- should be used for all allocated nodes", so the job runs on nodes of one model, whichever can start it.
-- A job that names a constraint keeps it: `--constraint=h100` picks a model, `--constraint="h100|h200"`
-- (plain OR) lets a job span models. slurm.conf's Weight= only orders nodes: a job that cannot be
-- satisfied by the lowest weight gets the next weight's nodes added (slurm.conf(5) Weight), so it does
-- not keep a multi-node job on one model. Nothing else about a job changes.
--
-- The partitions' QOS are read from slurmctld's own partition records (part_list: name, qos,
-- flag_default; job_submit_lua.c _part_rec_field), so this file holds no copy of slurm.conf.

-- The QOS of the partitions a job names (its comma-separated list, or the default partition when it
-- names none) when they all carry the same one; nil otherwise (a partition without a QOS, an unknown
-- partition, or partitions with different QOS: the job keeps Slurm's own choice).
local function bound_qos(partition, part_list)
   if partition == nil or partition == "" then
      for _, part in pairs(part_list) do
         if part.flag_default == 1 then
            return part.qos
         end
      end
      return nil
   end
   local found = nil
   for name in string.gmatch(partition, "[^,]+") do
      local part = part_list[name]
      local qos = part and part.qos
      if qos == nil or qos == "" or (found ~= nil and qos ~= found) then
         return nil
      end
      found = qos
   end
   return found
end

-- The partitions a job names (its comma-separated list), or the default partition when it names none.
local function job_partitions(partition, part_list)
   local names = {}
   if partition == nil or partition == "" then
      for name, part in pairs(part_list) do
         if part.flag_default == 1 then
            names[#names + 1] = name
         end
      end
   else
      for name in string.gmatch(partition, "[^,]+") do
         names[#names + 1] = name
      end
   end
   return names
end

-- "[m1|m2|...]" over the GPU models of the named partitions when they hold more than one; nil when they
-- hold one, or when one of them has no GPU nodes (its nodes carry no GPU type feature: the constraint
-- would shut the job out of it) or is unknown.
local function one_model(names)
   local seen, models = {}, {}
   for _, name in ipairs(names) do
      local list = GPU_MODELS[name]
      if list == nil then
         return nil
      end
      for _, model in ipairs(list) do
         if not seen[model] then
            seen[model] = true
            models[#models + 1] = model
         end
      end
   end
   if #models < 2 then
      return nil
   end
   return "[" .. table.concat(models, "|") .. "]"
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if job_desc.qos == nil or job_desc.qos == "" then
      local qos = bound_qos(job_desc.partition, part_list)
      if qos ~= nil then
         job_desc.qos = qos
      end
   end
   if job_desc.features == nil or job_desc.features == "" then
      local constraint = one_model(job_partitions(job_desc.partition, part_list))
      if constraint ~= nil then
         job_desc.features = constraint
      end
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
