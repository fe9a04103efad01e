-- A job that names no QOS runs under the QOS of the partition it is sent to (slurm.conf
-- `PartitionName=... QOS=`), so the tier the definition binds to a partition (the QOS's priority,
-- what it preempts, what preempts it) is the job's own. Slurm alone would give such a job its
-- association's DefaultQOS: a partition's QOS lends the partition its limits, "not ... any priority
-- or preemption characteristics" (qos.shtml, Partition QOS; slurm.conf(5) QOS). AllowQos on those
-- partitions refuses a job that names another tier's QOS there. Nothing else about a job changes.
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

function slurm_job_submit(job_desc, part_list, submit_uid)
   if job_desc.qos == nil or job_desc.qos == "" then
      local qos = bound_qos(job_desc.partition, part_list)
      if qos ~= nil then
         job_desc.qos = qos
      end
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
